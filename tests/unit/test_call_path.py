"""The call path from a sandbox's bytes to a journaled outcome, with no process and no gRPC.

Each test calls tools through ``toolbridge.testing.ToolHarness``, which drives the daemon's own
``call_tool`` over a real SQLite journal in a temp dir.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from toolbridge import ToolContext, ToolError, ToolOptions, tool
from toolbridge.testing import SandboxCall, ToolHarness, encode_call

NO_WAIT = ToolOptions(attempts=3, retry_backoff=0, retry_backoff_max=0)


class Order(BaseModel):
    order_id: str
    quantity: int


def counted(calls: list[Any]) -> Any:
    async def run(order: Order, ctx: ToolContext) -> dict[str, Any]:
        calls.append((order, ctx.attempt, ctx.idempotency_key))
        return {"order_id": order.order_id, "total": order.quantity * 10}

    return tool.step(run=run, input=Order)


async def test_a_call_returns_the_result_and_is_journaled_under_its_step_key() -> None:
    calls: list[Any] = []
    async with ToolHarness({"price": counted(calls)}, command="agent") as harness:
        call = await harness.call("price", order_id="o-1", quantity=2)
        assert call.result == {"order_id": "o-1", "total": 20}
        assert call.result_json == '{"order_id":"o-1","total":20}'
        assert not call.replayed
        assert call.step_key.startswith("agent/price@")
        [rec] = await harness.recorded()
    assert (rec.key, rec.parent_key, rec.kind, rec.status) == (call.step_key, "agent", "tool", "completed")
    assert json.loads(rec.input_json or "") == {"order_id": "o-1", "quantity": 2}
    assert len(calls) == 1


async def test_the_bytes_are_the_clients() -> None:
    assert encode_call(("a", 1), {}) == (b'["a",1]', b"")
    assert encode_call((), {"name": "é"}) == (b"", '{"name":"é"}'.encode())
    assert encode_call((), {}) == (b"", b"")


async def test_bad_arguments_fail_with_a_validation_error_and_the_tool_does_not_run() -> None:
    calls: list[Any] = []
    async with ToolHarness({"price": counted(calls)}) as harness:
        call = await harness.call("price", order_id="o-1", quantity="two")
        assert call.error is not None
        assert call.error.type == "ValidationError"
        assert "quantity" in call.error.message
        [rec] = await harness.recorded()
    assert calls == []
    assert rec.status == "failed"
    assert rec.error is not None
    assert rec.error["type"] == "ValidationError"


async def test_a_strict_tool_refuses_coercion_and_unknown_fields() -> None:
    calls: list[Any] = []
    async with ToolHarness({"price": counted(calls)}) as harness:
        coerced = await harness.call("price", order_id="o-1", quantity="2")
        extra = await harness.call("price", order_id="o-1", quantity=2, coupon="FREE")
    assert coerced.error is not None
    assert coerced.error.type == "ValidationError"
    assert extra.error is not None
    assert extra.error.type == "ValidationError"
    assert calls == []


async def test_malformed_bytes_are_refused_before_any_step() -> None:
    calls: list[Any] = []
    async with ToolHarness({"price": counted(calls)}) as harness:
        not_json = await harness.call_json("price", b"", b'{"order_id": ')
        not_object = await harness.call_json("price", b"", b"[1]")
        unknown = await harness.call("refund", order_id="o-1")
        assert await harness.recorded() == []
    assert [c.error.type if c.error else None for c in (not_json, not_object, unknown)] == [
        "InvalidArgument",
        "InvalidArgument",
        "ToolNotFound",
    ]
    assert all(c.step_key == "" for c in (not_json, not_object, unknown))
    assert calls == []


async def test_an_oversized_request_is_refused() -> None:
    calls: list[Any] = []
    options = ToolOptions(max_request_bytes=64)
    async with ToolHarness({"price": counted(calls)}, options=options) as harness:
        call = await harness.call("price", order_id="x" * 100, quantity=1)
    assert call.error is not None
    assert call.error.type == "RequestTooLarge"
    assert calls == []


async def test_a_retryable_error_is_retried_with_the_same_idempotency_key() -> None:
    seen: list[tuple[int, str]] = []

    def flaky(args: dict[str, Any], ctx: ToolContext) -> str:
        seen.append((ctx.attempt, ctx.idempotency_key))
        if ctx.attempt < 3:
            raise ToolError("busy", type="Busy", retryable=True)
        return "done"

    async with ToolHarness({"flaky": tool.step(run=flaky)}, options=NO_WAIT) as harness:
        call = await harness.call("flaky")
        [rec] = await harness.recorded()
    assert call.result == "done"
    assert [attempt for attempt, _ in seen] == [1, 2, 3]
    assert len({key for _, key in seen}) == 1
    assert seen[0][1] == rec.idempotency_key
    assert rec.attempts == 3
    assert [entry.get("error", {}).get("type") for entry in rec.attempt_log] == ["Busy", "Busy", None]


async def test_a_non_retryable_error_is_final_at_once() -> None:
    attempts: list[int] = []

    def refuse(args: dict[str, Any], ctx: ToolContext) -> None:
        attempts.append(ctx.attempt)
        raise ToolError("no such order", type="NotFound", retryable=False)

    async with ToolHarness({"refuse": tool.step(run=refuse)}, options=NO_WAIT) as harness:
        call = await harness.call("refuse")
    assert attempts == [1]
    assert call.error is not None
    assert (call.error.type, call.error.message, call.error.retryable) == ("NotFound", "no such order", False)


async def test_retries_stop_at_the_last_attempt() -> None:
    attempts: list[int] = []

    def always_busy(args: dict[str, Any], ctx: ToolContext) -> None:
        attempts.append(ctx.attempt)
        raise ToolError("busy", type="Busy", retryable=True)

    busy = tool.step(run=always_busy, attempts=2)
    async with ToolHarness({"busy": busy}, options=NO_WAIT) as harness:
        call = await harness.call("busy")
    assert attempts == [1, 2]
    assert call.error is not None
    assert call.error.type == "Busy"


async def test_an_unexpected_exception_is_hidden_behind_an_error_id() -> None:
    def broken(args: dict[str, Any]) -> None:
        raise RuntimeError("password=hunter2")

    async with ToolHarness({"broken": tool.step(run=broken)}, options=NO_WAIT) as harness:
        call = await harness.call("broken")
        [rec] = await harness.recorded()
    assert call.error is not None
    assert call.error.type == "InternalError"
    assert not call.error.retryable
    assert "hunter2" not in call.error.message
    assert call.error.error_id
    assert call.error.error_id in call.error.message
    # Unexpected failures are retried; the detail of each stays in the journal.
    assert rec.attempts == 3
    assert "hunter2" in json.dumps(rec.attempt_log[-1])


async def test_two_concurrent_identical_host_calls_run_once() -> None:
    started = asyncio.Event()
    release = asyncio.Event()
    runs: list[str] = []

    async def slow(args: dict[str, Any]) -> str:
        runs.append("ran")
        started.set()
        await release.wait()
        return "once"

    async with ToolHarness({"slow": tool.step(run=slow)}, command=None) as harness:
        first = asyncio.ensure_future(harness.call("slow", id=1))
        async with asyncio.timeout(5):
            await started.wait()
        second = asyncio.ensure_future(harness.call("slow", id=1))
        await asyncio.sleep(0)  # let the second call reach the step in flight
        release.set()
        one, two = await asyncio.gather(first, second)
    assert runs == ["ran"]
    assert one.step_key == two.step_key == one.step_key.split("/")[-1]
    assert one.result == two.result == "once"
    assert not two.replayed  # it joined the call in flight; it did not find a recorded one


async def test_the_same_call_twice_in_one_command_is_two_steps() -> None:
    calls: list[Any] = []
    async with ToolHarness({"price": counted(calls)}) as harness:
        one = await harness.call("price", order_id="o-1", quantity=1)
        two = await harness.call("price", order_id="o-1", quantity=1)
    assert two.step_key == one.step_key + "#2"
    assert len(calls) == 2


async def test_the_call_budget_is_enforced() -> None:
    calls: list[Any] = []
    async with ToolHarness({"price": counted(calls)}, options=ToolOptions(max_calls=1)) as harness:
        first = await harness.call("price", order_id="o-1", quantity=1)
        over = await harness.call("price", order_id="o-2", quantity=1)
    assert first.error is None
    assert over.error is not None
    assert over.error.type == "MaxCallsExceeded"
    assert len(calls) == 1


async def test_on_start_rewrites_the_input_and_on_finish_the_result() -> None:
    seen: list[Order] = []

    def run(order: Order) -> dict[str, Any]:
        seen.append(order)
        return {"total": order.quantity}

    priced = tool.step(
        run=run,
        input=Order,
        on_start=lambda data: {**data, "quantity": data["quantity"] * 2},
        on_finish=lambda result: {**result, "checked": True},
    )
    async with ToolHarness({"price": priced}) as harness:
        call = await harness.call("price", order_id="o-1", quantity=2)
        [rec] = await harness.recorded()
    assert seen == [Order(order_id="o-1", quantity=4)]
    assert call.result == {"total": 4, "checked": True}
    hooks = [entry for entry in rec.attempt_log if "hook" in entry]
    assert [entry["hook"] for entry in hooks] == ["on_start", "on_finish"]
    assert hooks[0]["input"] == {"order_id": "o-1", "quantity": 4}
    assert hooks[1]["tool_result"] == {"total": 4}
    # The step keeps the call as the sandbox made it; its key hashes that.
    assert json.loads(rec.input_json or "") == {"order_id": "o-1", "quantity": 2}


async def test_on_start_refusing_means_the_tool_never_runs() -> None:
    calls: list[Any] = []

    def refuse(data: dict[str, Any]) -> None:
        raise ToolError("not during the freeze", type="Frozen")

    def crash(data: dict[str, Any]) -> None:
        raise KeyError("secret-detail")

    async with ToolHarness(
        {
            "refused": tool.step(run=lambda a: calls.append(a), on_start=refuse),
            "crashed": tool.step(run=lambda a: calls.append(a), on_start=crash),
        }
    ) as harness:
        refused = await harness.call("refused")
        crashed = await harness.call("crashed")
    assert calls == []
    assert refused.error is not None
    assert (refused.error.type, refused.error.message) == (
        "Frozen",
        "not during the freeze",
    )
    assert crashed.error is not None
    assert crashed.error.type == "Refused"
    assert "secret-detail" not in crashed.error.message


async def test_on_start_returning_an_invalid_input_is_a_validation_error() -> None:
    calls: list[Any] = []
    priced = tool.step(run=lambda o: calls.append(o), input=Order, on_start=lambda d: {"order_id": 1})
    async with ToolHarness({"price": priced}) as harness:
        call = await harness.call("price", order_id="o-1", quantity=2)
    assert call.error is not None
    assert call.error.type == "ValidationError"
    assert calls == []


async def test_a_result_that_breaks_the_output_schema_is_an_error() -> None:
    class Total(BaseModel):
        total: int

    bad = tool.step(run=lambda a: {"total": "lots"}, output=Total)
    async with ToolHarness({"bad": bad}) as harness:
        call = await harness.call("bad")
    assert call.error is not None
    assert call.error.type == "OutputValidationError"


async def test_a_reply_over_the_limit_is_an_error() -> None:
    big = tool.step(run=lambda a: "x" * 200)
    async with ToolHarness({"big": big}, options=ToolOptions(max_reply_bytes=100)) as harness:
        call = await harness.call("big")
    assert call.error is not None
    assert call.error.type == "ReplyTooLarge"


def test_a_failed_calls_result_raises_its_error() -> None:
    error = ToolError("nope", type="Nope")
    call = SandboxCall("k", error=error)
    with pytest.raises(ToolError) as raised:
        call.result  # noqa: B018
    assert raised.value is error
