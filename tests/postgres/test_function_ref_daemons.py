"""``function_ref("refund")`` across daemons: a tool on daemon A runs the function only B declares.

Two bridges share one journal (a SQLite file, and separately a PostgreSQL database): A gives
a sandboxed snippet the tool ``function_ref("refund")``; only B declares the durable function
``refund``. The call reaches B through the journal, is validated against the schema B
registered, and fails with ``FunctionNotFound`` once B has closed. A replay of A's run (or a
retry of its interrupted call) never invokes the function again.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from toolbridge import Bridge, FunctionContext, ToolError, ToolOptions, event_type, function_ref

CALL = """
try:
    return await tools.refund(**ARGS)
except ToolError as error:
    return {"error": error.type, "message": error.message}
"""
OPTIONS = ToolOptions(tool_timeout="30s")


class Refund(BaseModel):
    order_id: str
    amount: int


def daemon_b(
    journal_url: str,
    calls: list[dict[str, Any]],
    gate: asyncio.Event | None = None,
    started: asyncio.Event | None = None,
) -> Bridge:
    """Daemon B: declares ``refund`` (triggered by ``order/refund``, data checked by ``Refund``)."""
    bridge = Bridge(journal=journal_url)

    @bridge.function(id="refund", trigger=event_type("order/refund", schema=Refund))
    async def refund(ctx: FunctionContext) -> dict[str, Any]:
        calls.append(ctx.event.data)
        if ctx.event.data["amount"] > 1000:
            raise ToolError("refunds over 1000 need a person", type="TooLarge")
        if started is not None:
            started.set()
        if gate is not None:
            await gate.wait()
        return {"refunded": ctx.event.data["order_id"], "by": "B", "run": ctx.run_id}

    return bridge


def daemon_a(journal_url: str) -> Bridge:
    """Daemon A: a tool naming ``refund``, which it does not declare."""
    return Bridge(
        journal=journal_url, tools={"refund": function_ref("refund", description="Refund an order")}
    )


async def snippet_call(bridge: Bridge, run_id: str, args: dict[str, Any]) -> Any:
    async with bridge.run(run_id) as step:
        return await step.sandbox.python(
            "agent",
            f"ARGS = {args!r}\n{CALL}",
            tools={"refund": function_ref("refund")},
            tool_options=OPTIONS,
        )


async def test_a_sandboxed_call_on_a_runs_the_function_b_declares(journal_url: str) -> None:
    calls: list[dict[str, Any]] = []
    async with daemon_b(journal_url, calls), daemon_a(journal_url) as a:
        result = await snippet_call(a, "agent-1", {"order_id": "o1", "amount": 5})
        assert result["refunded"] == "o1"
        assert result["by"] == "B"
        assert result["run"].startswith("refund/inv_")  # a run of its own, on B
        assert calls == [{"order_id": "o1", "amount": 5}]


async def test_bad_input_gets_the_schema_error_b_registered_and_b_never_runs(journal_url: str) -> None:
    calls: list[dict[str, Any]] = []
    async with daemon_b(journal_url, calls), daemon_a(journal_url) as a:
        result = await snippet_call(a, "agent-bad", {"order_id": "o1", "amount": "lots"})
    assert result["error"] == "ValidationError"
    assert "'refund'" in result["message"]
    assert "amount" in result["message"]
    assert calls == []


async def test_with_b_closed_the_call_fails_naming_the_function(journal_url: str) -> None:
    calls: list[dict[str, Any]] = []
    async with daemon_a(journal_url) as a:
        async with daemon_b(journal_url, calls):
            served = await snippet_call(a, "agent-open", {"order_id": "o1", "amount": 5})
            assert served["by"] == "B"
        # B closed cleanly: its registration is gone from the journal at once.
        result = await snippet_call(a, "agent-closed", {"order_id": "o2", "amount": 5})
    assert result["error"] == "FunctionNotFound"
    assert "no daemon of this journal serves function 'refund'" in result["message"]
    assert [c["order_id"] for c in calls] == ["o1"]


async def test_a_replay_of_the_calling_run_does_not_invoke_again(journal_url: str) -> None:
    calls: list[dict[str, Any]] = []
    async with daemon_b(journal_url, calls), daemon_a(journal_url) as a:
        first = await snippet_call(a, "agent-replay", {"order_id": "o1", "amount": 5})
        again = await snippet_call(a, "agent-replay", {"order_id": "o1", "amount": 5})
        by_host = await a.call_tool("refund", {"order_id": "o3", "amount": 1}, run_id="host-replay")
        by_host_again = await a.call_tool("refund", {"order_id": "o3", "amount": 1}, run_id="host-replay")
    assert again == first
    assert by_host_again == by_host
    assert [c["order_id"] for c in calls] == ["o1", "o3"]


async def test_an_interrupted_call_retried_finds_the_same_invocation(journal_url: str) -> None:
    calls: list[dict[str, Any]] = []
    gate, started = asyncio.Event(), asyncio.Event()
    async with daemon_b(journal_url, calls, gate, started), daemon_a(journal_url) as a:
        args = {"order_id": "o1", "amount": 5}
        interrupted = asyncio.ensure_future(a.call_tool("refund", args, run_id="cut"))
        b_started = asyncio.ensure_future(started.wait())
        await asyncio.wait({b_started, interrupted}, timeout=20, return_when=asyncio.FIRST_COMPLETED)
        assert b_started.done(), interrupted  # B runs it, and holds it (A waits)
        interrupted.cancel()  # A stops waiting (a host that stopped): its step stays running
        with pytest.raises(asyncio.CancelledError):
            await interrupted
        gate.set()
        result = await a.call_tool("refund", args, run_id="cut")  # the replay waits for B's result
    assert result["refunded"] == "o1"
    assert len(calls) == 1


async def test_a_step_invoke_by_id_reaches_b_too(journal_url: str) -> None:
    calls: list[dict[str, Any]] = []
    async with daemon_b(journal_url, calls), daemon_a(journal_url) as a:
        async with a.run("invoker") as step:
            result = await step.invoke("refund-1", function="refund", data={"order_id": "o7", "amount": 2})
        with pytest.raises(ToolError, match="no daemon of this journal serves function 'nope'"):
            async with a.run("invoker-2") as step:
                await step.invoke("nope", function="nope", data={})
    assert (result["refunded"], result["by"]) == ("o7", "B")
    assert len(calls) == 1


async def test_with_two_daemons_serving_it_each_call_runs_once(journal_url: str) -> None:
    calls: list[dict[str, Any]] = []
    async with daemon_b(journal_url, calls), daemon_b(journal_url, calls), daemon_a(journal_url) as a:
        results = await asyncio.gather(
            *(a.call_tool("refund", {"order_id": f"o{n}", "amount": n}, run_id=f"many-{n}") for n in range(8))
        )
    assert [r["refunded"] for r in results] == [f"o{n}" for n in range(8)]
    assert sorted(c["order_id"] for c in calls) == sorted(f"o{n}" for n in range(8))


async def test_the_error_of_the_function_on_b_reaches_the_sandbox_on_a(journal_url: str) -> None:
    calls: list[dict[str, Any]] = []
    async with daemon_b(journal_url, calls), daemon_a(journal_url) as a:
        result = await snippet_call(a, "agent-big", {"order_id": "o1", "amount": 5000})
        again = await snippet_call(a, "agent-big", {"order_id": "o1", "amount": 5000})  # a replay
    assert result == {"error": "TooLarge", "message": "refunds over 1000 need a person"}
    assert again == result
    assert len(calls) == 1  # not retryable: B ran it once, and A's replay did not ask again
