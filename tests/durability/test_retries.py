"""Which failures are retried, how often, and what the journal shows of each attempt."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tests.e2e.test_limits_and_errors import probe
from toolbridge import Bridge, NonRetriableError, ToolContext, ToolError, ToolOptions, tool

QUICK = ToolOptions(retry_backoff=0.001, retry_backoff_max=0.001)


class Amount(BaseModel):
    amount: int


def attempts_of(journal: Path, name: str) -> list[dict[str, Any]]:
    with sqlite3.connect(journal) as db:
        (log,) = db.execute("SELECT attempt_log FROM steps WHERE name = ?", (name,)).fetchone()
    return list(json.loads(log))


async def test_retryable_failures_are_retried_until_the_attempts_run_out(
    bridge: Bridge, tmp_path: Path, journal_path: Path
) -> None:
    seen: list[int] = []

    def busy(args: Amount, ctx: ToolContext) -> None:
        seen.append(ctx.attempt)
        raise ToolError("the ledger is busy", type="Busy", retryable=True)

    outcomes = await probe(
        bridge,
        tmp_path,
        {"busy": tool.step(input=Amount, run=busy, attempts=4)},
        [("busy", [], {"amount": 1})],
        QUICK,
    )
    assert outcomes[0]["type"] == "Busy"
    assert seen == [1, 2, 3, 4]  # the tool's own attempts win over ToolOptions.attempts (3)
    assert [entry["error"]["type"] for entry in attempts_of(journal_path, "busy")] == ["Busy"] * 4


async def test_non_retriable_errors_fail_at_once(bridge: Bridge, tmp_path: Path, journal_path: Path) -> None:
    seen: list[int] = []

    def declined(args: Amount, ctx: ToolContext) -> None:
        seen.append(ctx.attempt)
        raise NonRetriableError("card declined", type="Declined")

    outcomes = await probe(
        bridge, tmp_path, {"pay": tool.step(input=Amount, run=declined)}, [("pay", [], {"amount": 1})], QUICK
    )
    assert (outcomes[0]["type"], outcomes[0]["message"]) == ("Declined", "card declined")
    assert seen == [1]


async def test_a_plain_tool_error_is_final_unless_marked_retryable(bridge: Bridge, tmp_path: Path) -> None:
    seen: list[int] = []

    def refuse() -> None:
        seen.append(1)
        raise ToolError("no such invoice")

    outcomes = await probe(bridge, tmp_path, {"refuse": refuse}, [("refuse", [], {})], QUICK)
    assert outcomes[0]["type"] == "ToolError"
    assert seen == [1]


async def test_validation_errors_are_final_and_run_nothing(
    bridge: Bridge, tmp_path: Path, journal_path: Path
) -> None:
    seen: list[int] = []
    pay = tool.step(input=Amount, run=lambda args, ctx: seen.append(1))
    outcomes = await probe(bridge, tmp_path, {"pay": pay}, [("pay", [], {"amount": "lots"})], QUICK)
    assert outcomes[0]["type"] == "ValidationError"
    assert seen == []
    assert attempts_of(journal_path, "pay") == []


async def test_a_timeout_on_the_last_attempt_is_final(
    bridge: Bridge, tmp_path: Path, journal_path: Path
) -> None:
    async def hang() -> None:
        await asyncio.Event().wait()

    options = ToolOptions(tool_timeout=0.05, attempts=3, retry_backoff=0.001)
    outcomes = await probe(bridge, tmp_path, {"hang": hang}, [("hang", [], {})], options)
    assert outcomes[0]["type"] == "ToolTimeout"
    assert [entry["error"]["type"] for entry in attempts_of(journal_path, "hang")] == ["ToolTimeout"] * 3
