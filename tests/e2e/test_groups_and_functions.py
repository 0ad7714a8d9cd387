"""tool.group bodies with real steps, durable functions as tools and triggers, events and waits."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tests.e2e.test_limits_and_errors import probe
from tests.helpers import WAIT
from toolbridge import (
    Bridge,
    FunctionContext,
    ToolContext,
    ToolOptions,
    event_type,
    tool,
)

QUICK = ToolOptions(retry_backoff=0.001, retry_backoff_max=0.001)


class OrderId(BaseModel):
    orderId: str  # noqa: N815 - the seed's field name


def steps_under(journal: Path, parent_suffix: str) -> list[sqlite3.Row]:
    with sqlite3.connect(journal) as db:
        db.row_factory = sqlite3.Row
        return db.execute(
            "SELECT * FROM steps WHERE parent_key LIKE ? ORDER BY seq", (f"%{parent_suffix}",)
        ).fetchall()


async def test_a_group_runs_parallel_steps_once_even_when_retried(
    bridge: Bridge, tmp_path: Path, journal_path: Path
) -> None:
    ran: list[str] = []

    async def body(args: OrderId, ctx: ToolContext) -> dict[str, Any]:
        def lookup(part: str) -> str:
            ran.append(part)
            return f"{part}:{args.orderId}"

        items, invoice = await asyncio.gather(
            ctx.step.run("items", lookup, "items"), ctx.step.run("invoice", lookup, "invoice")
        )
        if ctx.attempt == 1:
            raise ConnectionError("the refund API dropped the connection")
        refund = await ctx.step.run("refund", lookup, "refund")
        return {"items": items, "invoice": invoice, "refund": refund}

    refund = tool.group(input=OrderId, run=body)
    outcomes = await probe(bridge, tmp_path, {"refund": refund}, [("refund", [{"orderId": "o1"}], {})], QUICK)
    assert outcomes == [{"value": {"items": "items:o1", "invoice": "invoice:o1", "refund": "refund:o1"}}]
    assert sorted(ran) == ["invoice", "items", "refund"]  # the retry did not run items/invoice again
    nested = [row["name"] for row in steps_under(journal_path, "refund@" + "%")]
    assert sorted(nested) == ["invoice", "items", "refund"]


async def test_a_durable_function_is_a_tool_with_its_trigger_schema(bridge: Bridge, tmp_path: Path) -> None:
    refunded: list[str] = []

    @bridge.function(id="refund", trigger=event_type("order/refund", schema=OrderId))
    async def refund_fn(ctx: FunctionContext) -> dict[str, str]:
        refunded.append(ctx.event.data["orderId"])
        sent = await ctx.step.send_event("notify", {"name": "order/refunded", "data": ctx.event.data})
        return {"status": "refunded", "event": sent[0][:4]}

    outcomes = await probe(
        bridge,
        tmp_path,
        {"refund": refund_fn},
        [
            ("refund", [], {"orderId": "o7"}),
            ("refund", [], {"order": 7}),
            ("refund", [{"orderId": "o8"}], {}),
        ],
        QUICK,
    )
    assert outcomes[0] == {"value": {"status": "refunded", "event": "evt_"}}
    assert outcomes[1]["type"] == "ValidationError"
    assert "/orderId" in outcomes[1]["message"]
    assert outcomes[2] == {"value": {"status": "refunded", "event": "evt_"}}
    assert refunded == ["o7", "o8"]


async def test_an_event_starts_the_functions_it_triggers(bridge: Bridge, journal_path: Path) -> None:
    done: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    @bridge.function(id="on-refund", trigger=event_type("order/refunded"))
    async def on_refund(ctx: FunctionContext) -> None:
        note = await ctx.step.run("note", lambda: f"noted {ctx.event.data['orderId']}")
        done.set_result(note)

    async with bridge.run("sender") as step:
        await step.send_event("refunded", {"name": "order/refunded", "data": {"orderId": "o9"}})
    assert await asyncio.wait_for(done, WAIT) == "noted o9"


async def test_a_wait_returns_the_matching_event_sent_after_it_began(bridge: Bridge) -> None:
    waiting = asyncio.Event()

    async def announce() -> None:
        waiting.set()

    async def wait_for_approval(args: OrderId, ctx: ToolContext) -> Any:
        await ctx.step.run("announce", announce)
        event = await ctx.step.wait_for_event(
            "approval",
            event="order/approved",
            timeout=WAIT,
            match=lambda e: e.data["orderId"] == args.orderId,
        )
        return None if event is None else event.data

    await bridge.send_event("order/approved", {"orderId": "o1", "by": "too early"})
    async with bridge.run("approve") as step:
        approval = tool.group(input=OrderId, run=wait_for_approval)

        asking = asyncio.create_task(
            step.sandbox.python(
                "ask", 'return await tools.approve(orderId="o1")', tools={"approve": approval}
            )
        )
        await asyncio.wait_for(waiting.wait(), WAIT)
        # The wait begins a moment after `announce`; an event sent before it began does not
        # count, so keep answering until the wait has taken an answer.
        async with asyncio.timeout(WAIT):
            while not asking.done():
                await bridge.send_event("order/approved", {"orderId": "o2", "by": "someone else"})
                await bridge.send_event("order/approved", {"orderId": "o1", "by": "ana"})
                await asyncio.wait({asking}, timeout=0.05)
        outcome = await asking
    assert outcome == {"orderId": "o1", "by": "ana"}


async def test_a_wait_times_out_in_windows(bridge: Bridge, journal_path: Path) -> None:
    async def wait_briefly(args: dict[str, Any], ctx: ToolContext) -> Any:
        return await ctx.step.wait_for_event("nothing", event="never/sent", timeout=0.3)

    options = ToolOptions(wait_window=0.1)
    async with bridge.run("windows") as step:
        outcome = await step.sandbox.python(
            "ask",
            "return await tools.wait()",
            tools={"wait": tool.group(run=wait_briefly)},
            tool_options=options,
        )
    assert outcome is None
    with sqlite3.connect(journal_path) as db:
        (log,) = db.execute("SELECT attempt_log FROM steps WHERE kind = 'wait_for_event'").fetchone()
    windows = json.loads(log)
    assert len(windows) >= 2  # each window that passed without the event is on record
    assert all(w["finished_at"] - w["started_at"] <= 0.1 + 0.05 for w in windows)


async def test_sleep_and_invoke_are_memoized_on_replay(journal_path: Path) -> None:
    calls: list[int] = []

    async with Bridge(journal=journal_path) as bridge:

        @bridge.function(id="double")
        async def double(ctx: FunctionContext) -> int:
            calls.append(1)
            return int(ctx.event.data["n"]) * 2

        async with bridge.run("invoke") as step:
            await step.sleep("pause", 0.01)
            assert await step.invoke("twice", function=double, data={"n": 21}) == 42
        async with bridge.run("invoke") as step:
            await step.sleep("pause", 3600)  # recorded as done: replay does not sleep again
            assert await step.invoke("twice", function=double, data={"n": 21}) == 42
    assert calls == [1]
