"""Lifecycle hooks, end to end from a sandboxed script, and what the journal keeps of them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from toolbridge import Bridge, ToolError, tool
from toolbridge._cli.main import main
from toolbridge._journal.sqlite import SQLiteJournal
from toolbridge._records import StepRecord

AGENT = """
import asyncio, json
from inngest_tools import ToolError, tools

async def attempt(label, call, out):
    try:
        out[label] = {"result": await call}
    except ToolError as error:
        out[label] = {"type": error.type, "message": error.message, "error_id": error.error_id}

async def main():
    out = {}
    await attempt("rewritten", tools.transfer(amount=5, currency="eur"), out)
    await attempt("refused", tools.transfer(amount=10000, currency="EUR"), out)
    await attempt("hook_crashed", tools.transfer(amount=13, currency="EUR"), out)
    await attempt("bad_rewrite", tools.transfer(amount=7, currency="EUR"), out)
    await attempt("finish_refused", tools.transfer(amount=99, currency="EUR"), out)
    await attempt("finish_crashed", tools.transfer(amount=98, currency="EUR"), out)
    await attempt("finish_off_schema", tools.transfer(amount=97, currency="EUR"), out)
    print(json.dumps(out))

asyncio.run(main())
"""


class Transfer(BaseModel):
    amount: int
    currency: str


class Receipt(BaseModel):
    amount: int
    currency: str
    receipt: str


async def load_steps_by_kind(journal_path: Path, run_id: str) -> dict[str, list[StepRecord]]:
    journal = SQLiteJournal(journal_path)
    await journal.open()
    try:
        grouped: dict[str, list[StepRecord]] = {}
        for step in await journal.load_steps(run_id):
            grouped.setdefault(step.kind, []).append(step)
        return grouped
    finally:
        await journal.close()


async def tool_steps_by_amount(journal_path: Path, run_id: str) -> dict[int, StepRecord]:
    steps = (await load_steps_by_kind(journal_path, run_id))["tool"]
    return {json.loads(s.input_json or "")["amount"]: s for s in steps}


def hook_entries(step: StepRecord, hook: str) -> list[dict[str, Any]]:
    return [entry for entry in step.attempt_log if entry.get("hook") == hook]


async def test_hooks_rewrite_refuse_and_are_journaled(
    bridge: Bridge, script: Callable[[str, str], Path], tmp_path: Path, journal_path: Path
) -> None:
    script("agent.py", AGENT)
    ran: list[dict[str, Any]] = []

    def on_start(given: dict[str, Any]) -> dict[str, Any] | None:
        assert isinstance(given, dict)  # plain JSON data, not the model
        if given["amount"] > 1000:
            raise ToolError("transfers above 1000 need a manager", type="LimitExceeded")
        if given["amount"] == 13:
            raise RuntimeError("unlucky number, database password is hunter2")
        if given["amount"] == 7:
            return {"amount": "seven", "currency": "EUR"}
        given["currency"] = given["currency"].upper()  # edited in place, returning None
        return None

    async def on_finish(result: dict[str, Any]) -> dict[str, Any]:
        if result["amount"] == 99:
            raise ToolError("the ledger is closed", type="LedgerClosed")
        if result["amount"] == 98:
            raise KeyError("ledger")
        if result["amount"] == 97:
            return {"amount": 97}  # no currency, no receipt: does not match output
        return {**result, "receipt": f"r-{result['amount']}"}

    def transfer(args: Transfer) -> dict[str, Any]:
        ran.append(args.model_dump())
        return args.model_dump()

    tools = {
        "transfer": tool.step(
            input=Transfer, output=Receipt, run=transfer, on_start=on_start, on_finish=on_finish
        )
    }
    async with bridge.run("hooks-1") as step:
        result = await step.sandbox.commands.run("agent", "python agent.py", tools=tools, cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)

    # on_start rewrote the input (in place), on_finish the result.
    assert out["rewritten"] == {"result": {"amount": 5, "currency": "EUR", "receipt": "r-5"}}
    # Refusals: the hook's own ToolError, or a generic one that keeps the detail out of the sandbox.
    assert out["refused"]["type"] == "LimitExceeded"
    assert out["refused"]["message"] == "transfers above 1000 need a manager"
    assert out["hook_crashed"]["type"] == "Refused"
    assert "hunter2" not in json.dumps(out["hook_crashed"])
    assert out["hook_crashed"]["error_id"].startswith("err_")
    assert out["bad_rewrite"]["type"] == "ValidationError"
    assert "after on_start: /amount" in out["bad_rewrite"]["message"]
    assert out["finish_refused"]["type"] == "LedgerClosed"
    assert out["finish_crashed"]["type"] == "InternalError"
    assert out["finish_off_schema"]["type"] == "OutputValidationError"
    # Refused by on_start: never ran. Refused by on_finish: ran, and its result was withheld.
    assert [r["amount"] for r in ran] == [5, 99, 98, 97]

    steps = await tool_steps_by_amount(journal_path, "hooks-1")
    rewritten = steps[5]
    # The step keeps the call as the sandbox made it, and the answer as it received it...
    assert json.loads(rewritten.input_json or "") == {"amount": 5, "currency": "eur"}
    assert json.loads(rewritten.output_json or "") == {"amount": 5, "currency": "EUR", "receipt": "r-5"}
    # ...and each hook's effect beside the attempts.
    assert hook_entries(rewritten, "on_start")[0]["input"] == {"amount": 5, "currency": "EUR"}
    assert hook_entries(rewritten, "on_finish")[0]["tool_result"] == {"amount": 5, "currency": "EUR"}
    assert [e.get("hook", "attempt") for e in rewritten.attempt_log] == ["on_start", "attempt", "on_finish"]
    refused = steps[10000]
    assert refused.status == "failed"
    assert refused.attempts == 0
    assert hook_entries(refused, "on_start")[0]["error"]["type"] == "LimitExceeded"
    crashed = hook_entries(steps[13], "on_start")[0]["error"]
    assert "hunter2" in crashed["exception"]  # the detail stays with the host
    assert crashed["error_id"] == out["hook_crashed"]["error_id"]
    assert "KeyError" in hook_entries(steps[98], "on_finish")[0]["error"]["exception"]
    assert "output_error" in hook_entries(steps[97], "on_finish")[0]


async def test_an_unchanged_input_leaves_no_rewrite_in_the_journal(
    bridge: Bridge, journal_path: Path
) -> None:
    seen: list[Any] = []
    echo = tool.step(
        input=Transfer, run=lambda args: args.amount, on_start=seen.append, on_finish=lambda r: r
    )
    async with bridge.run("plain") as step:
        value = await step.sandbox.python(
            "snippet", "return await tools.echo(amount=1, currency='EUR')", tools={"echo": echo}
        )
    assert value == 1
    assert seen == [{"amount": 1, "currency": "EUR"}]
    steps = await load_steps_by_kind(journal_path, "plain")
    (call,) = steps["tool"]
    assert set(hook_entries(call, "on_start")[0]) == {"hook", "started_at", "finished_at"}
    assert set(hook_entries(call, "on_finish")[0]) == {"hook", "started_at", "finished_at"}


async def test_a_replayed_call_returns_the_recorded_answer_without_running_the_hooks(
    journal_path: Path,
) -> None:
    calls: list[str] = []

    def on_start(given: dict[str, Any]) -> dict[str, Any]:
        calls.append("on_start")
        return {**given, "currency": "EUR"}

    def on_finish(result: dict[str, Any]) -> dict[str, Any]:
        calls.append("on_finish")
        return {**result, "receipt": "r-1"}

    def transfer(args: Transfer) -> dict[str, Any]:
        calls.append("tool")
        return args.model_dump()

    tools = {"transfer": tool.step(input=Transfer, run=transfer, on_start=on_start, on_finish=on_finish)}
    async with Bridge(journal=journal_path, tools=tools) as first:
        answer = await first.call_tool("transfer", {"amount": 1, "currency": "usd"}, run_id="replay-1")
    assert answer == {"amount": 1, "currency": "EUR", "receipt": "r-1"}
    assert calls == ["on_start", "tool", "on_finish"]
    # A new daemon on the same journal: the run replays from it.
    async with Bridge(journal=journal_path, tools=tools) as second:
        again = await second.call_tool("transfer", {"amount": 1, "currency": "usd"}, run_id="replay-1")
    assert again == answer
    assert calls == ["on_start", "tool", "on_finish"]


async def test_the_trace_shows_what_each_hook_did(
    journal_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse_big(given: dict[str, Any]) -> dict[str, Any]:
        if given["amount"] > 100:
            raise ToolError("too much", type="LimitExceeded")
        return {**given, "currency": "EUR"}

    tools = {
        "transfer": tool.step(
            input=Transfer,
            run=lambda args: args.model_dump(),
            on_start=refuse_big,
            on_finish=lambda result: {**result, "receipt": "r-1"},
        )
    }
    async with Bridge(journal=journal_path, tools=tools) as bridge:
        await bridge.call_tool("transfer", {"amount": 1, "currency": "usd"}, run_id="traced")
        with pytest.raises(ToolError):
            await bridge.call_tool("transfer", {"amount": 500, "currency": "usd"}, run_id="traced")
    capsys.readouterr()
    # The CLI runs its own event loop: give it a thread, as a separate process would have.
    assert await asyncio.to_thread(main, ["trace", "traced", "--journal", str(journal_path)]) == 0
    shown = capsys.readouterr().out
    assert 'on_start: changed the input to {"amount": 1, "currency": "EUR"}' in shown
    assert """on_finish: replaced the tool's result {"amount": 1, "currency": "EUR"}""" in shown
    assert "on_start: LimitExceeded: too much" in shown
