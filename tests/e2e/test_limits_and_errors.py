"""Every limit and refusal, from real sandboxed code: a clear ToolError, nothing lost, still serving."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tests.helpers import call_request, error_of, held_command, raw_call, result_of
from toolbridge import Bridge, ToolError, ToolOptions, tool

PROBE = """
import asyncio, json
from inngest_tools import tools, ToolError

async def main():
    outcomes = []
    for name, args, kwargs in json.load(open("calls.json")):
        try:
            value = await getattr(tools, name)(*args, **kwargs)
            outcomes.append({"value": value})
        except ToolError as exc:
            outcomes.append({"type": exc.type, "message": exc.message, "error_id": exc.error_id})
    print(json.dumps(outcomes))

asyncio.run(main())
"""

FAST = ToolOptions(retry_backoff=0.01, retry_backoff_max=0.01)


async def probe(
    bridge: Bridge,
    tmp_path: Path,
    tools: dict[str, object],
    calls: list[tuple[str, list[Any], dict[str, Any]]],
    options: ToolOptions = FAST,
) -> list[dict[str, Any]]:
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "calls.json").write_text(json.dumps(calls))
    async with bridge.run() as step:
        result = await step.sandbox.commands.run(
            "probe", "python3 probe.py", tools=tools, tool_options=options, cwd=tmp_path
        )
    assert result.exit_code == 0, result.stderr
    outcomes: list[dict[str, Any]] = json.loads(result.stdout)
    return outcomes


def journal_steps(path: Path) -> list[sqlite3.Row]:
    with sqlite3.connect(path) as db:
        db.row_factory = sqlite3.Row
        return db.execute("SELECT * FROM steps WHERE kind = 'tool' ORDER BY seq").fetchall()


def echo(value: object) -> object:
    return value


async def test_a_request_over_256_kib_is_refused_and_the_next_call_works(
    bridge: Bridge, tmp_path: Path
) -> None:
    outcomes = await probe(
        bridge, tmp_path, {"echo": echo}, [("echo", ["x" * (256 * 1024)], {}), ("echo", ["ok"], {})]
    )
    assert outcomes[0]["type"] == "RequestTooLarge"
    assert "a call may be at most 262144 bytes" in outcomes[0]["message"]
    assert outcomes[1] == {"value": "ok"}


async def test_a_request_just_under_the_limit_is_accepted(bridge: Bridge, tmp_path: Path) -> None:
    value = "x" * (256 * 1024 - 100)
    outcomes = await probe(bridge, tmp_path, {"echo": lambda v: len(v)}, [("echo", [value], {})])
    assert outcomes == [{"value": len(value)}]


async def test_a_reply_over_1_mib_is_refused_and_journaled(
    bridge: Bridge, tmp_path: Path, journal_path: Path
) -> None:
    outcomes = await probe(
        bridge,
        tmp_path,
        {"big": lambda: "y" * (1024 * 1024), "echo": echo},
        [("big", [], {}), ("echo", ["after"], {})],
    )
    assert outcomes[0]["type"] == "ReplyTooLarge"
    assert "a reply may be at most 1048576 bytes" in outcomes[0]["message"]
    assert outcomes[1] == {"value": "after"}
    big = journal_steps(journal_path)[0]
    assert (big["name"], big["status"]) == ("big", "failed")
    assert json.loads(big["error_json"])["type"] == "ReplyTooLarge"


async def test_the_call_after_max_calls_fails_and_the_command_is_stopped(
    bridge: Bridge, tmp_path: Path
) -> None:
    ran: list[int] = []

    def count() -> int:
        ran.append(1)
        return len(ran)

    # The held command spends two calls (ready, hold); the budget leaves room for one more.
    async with held_command(
        bridge, tmp_path, {"count": count}, tool_options=ToolOptions(max_calls=3)
    ) as held:
        assert result_of(await raw_call(held, call_request("count"))) == 1
        error = error_of(await raw_call(held, call_request("count")))
        assert error.type == "MaxCallsExceeded"
        assert "more than 3 tool calls" in error.message
        result = await asyncio.wait_for(asyncio.shield(held.result), 30)
    assert result.stopped == "max_calls"
    assert result.exit_code < 0
    assert ran == [1]


async def test_a_tool_past_its_timeout_fails_with_tool_timeout(bridge: Bridge, tmp_path: Path) -> None:
    started: list[int] = []

    async def stuck() -> None:
        started.append(1)
        await asyncio.Event().wait()

    options = ToolOptions(tool_timeout=0.2, attempts=2, retry_backoff=0.01)
    outcomes = await probe(
        bridge, tmp_path, {"stuck": stuck, "echo": echo}, [("stuck", [], {}), ("echo", [1], {})], options
    )
    assert outcomes[0]["type"] == "ToolTimeout"
    assert "did not finish within 0.2 seconds" in outcomes[0]["message"]
    assert outcomes[1] == {"value": 1}
    assert len(started) == 2  # a timeout is retried while attempts remain


async def test_an_unexpected_exception_never_reaches_the_sandbox(
    bridge: Bridge, tmp_path: Path, journal_path: Path
) -> None:
    def leaky() -> None:
        raise RuntimeError("connection to postgres://admin:hunter2@db failed")

    outcomes = await probe(
        bridge, tmp_path, {"leaky": leaky, "echo": echo}, [("leaky", [], {}), ("echo", [2], {})]
    )
    failure = outcomes[0]
    assert failure["type"] == "InternalError"
    assert "hunter2" not in json.dumps(failure)
    assert failure["error_id"].startswith("err_")
    assert failure["error_id"] in failure["message"]
    assert outcomes[1] == {"value": 2}
    step = journal_steps(journal_path)[0]
    attempt_log = json.loads(step["attempt_log"])
    assert len(attempt_log) == 3  # retried: unexpected failures may be transient
    assert "hunter2" in attempt_log[-1]["error"]["exception"]
    assert json.loads(step["error_json"])["error_id"] == failure["error_id"]


async def test_a_tool_error_keeps_its_type_and_message(bridge: Bridge, tmp_path: Path) -> None:
    def refuse(amount: int) -> None:
        raise ToolError(f"refunds above 100 need approval, got {amount}", type="NeedsApproval")

    outcomes = await probe(bridge, tmp_path, {"refund": refuse}, [("refund", [500], {})])
    assert outcomes == [
        {"type": "NeedsApproval", "message": "refunds above 100 need approval, got 500", "error_id": ""}
    ]


class CustomerId(BaseModel):
    id: str


class Customer(BaseModel):
    name: str


async def test_invalid_arguments_get_a_validation_error_and_nothing_runs(
    bridge: Bridge, tmp_path: Path
) -> None:
    ran: list[str] = []

    def lookup(args: CustomerId, ctx: object) -> dict[str, str]:
        ran.append(args.id)
        return {"name": "Acme"}

    get_customer = tool.step(input=CustomerId, output=Customer, run=lookup)
    outcomes = await probe(
        bridge,
        tmp_path,
        {"getCustomer": get_customer},
        [
            ("getCustomer", [], {"id": 42}),
            ("getCustomer", [], {}),
            ("getCustomer", [], {"id": "cus_1", "extra": True}),
            ("getCustomer", [], {"id": "cus_1"}),
        ],
    )
    assert [o.get("type") for o in outcomes[:3]] == ["ValidationError"] * 3
    assert "/id" in outcomes[0]["message"]
    assert "/id" in outcomes[1]["message"]
    assert "/extra" in outcomes[2]["message"]
    assert outcomes[3] == {"value": {"name": "Acme"}}
    assert ran == ["cus_1"]


async def test_a_result_that_breaks_the_output_schema_is_refused(bridge: Bridge, tmp_path: Path) -> None:
    get_customer = tool.step(input=CustomerId, output=Customer, run=lambda args, ctx: {"nom": "Acme"})
    outcomes = await probe(
        bridge, tmp_path, {"getCustomer": get_customer}, [("getCustomer", [], {"id": "c"})]
    )
    assert outcomes[0]["type"] == "OutputValidationError"
    assert "nom" not in outcomes[0]["message"]  # the tool's data is not echoed back


@pytest.mark.parametrize("name", ["", "1abc", "-dash", "has space", "has.dot", "a" * 65, "émoji", None])
async def test_an_invalid_tool_name_is_refused_before_anything_runs(
    bridge: Bridge, tmp_path: Path, script: Callable[[str, str], Path], name: Any
) -> None:
    script("marker.py", "open('ran', 'w').write('yes')\n")
    async with bridge.run() as step:
        with pytest.raises(ValueError, match="invalid tool name"):
            await step.sandbox.commands.run("marker", "python3 marker.py", tools={name: echo}, cwd=tmp_path)
    assert not (tmp_path / "ran").exists()


async def test_a_64_character_name_is_accepted(bridge: Bridge, tmp_path: Path) -> None:
    name = "a" + "b" * 63
    outcomes = await probe(bridge, tmp_path, {name: echo}, [(name, ["long"], {})])
    assert outcomes == [{"value": "long"}]
