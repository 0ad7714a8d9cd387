"""Runs worth looking at, recorded by a real bridge: what the web view and the trace show.

``order-42`` is entered twice: the first entry ran ``legacy-check``, which the second does
not ask for again (stale). The second runs a Python snippet whose tool calls go over gRPC:
``lookup`` (an ``on_start`` hook upper-cases the SKU), ``miscount`` (its result fails the
output schema), ``flaky`` (fails once, then succeeds: two attempts) and ``awaitPayment`` (a
tool group whose wait for an event times out after its wait windows). ``refund-7`` fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from toolbridge import Bridge, ToolContext, ToolError, ToolOptions, tool


class Sku(BaseModel):
    sku: str


class Stock(BaseModel):
    sku: str
    stock: int


def _upper(value: dict[str, Any]) -> dict[str, Any]:
    return {**value, "sku": value["sku"].upper()}


_flaky_calls: list[str] = []


def _flaky(args: Sku) -> dict[str, Any]:
    _flaky_calls.append(args.sku)
    if len(_flaky_calls) % 2 == 1:
        raise ToolError("the warehouse is busy", type="Busy", retryable=True)
    return {"sku": args.sku, "stock": 3}


async def _await_payment(args: Sku, ctx: ToolContext) -> dict[str, Any]:
    found = await ctx.step.wait_for_event("paid", event="order/paid", timeout=0.12)
    return {"paid": found is not None}


TOOLS = {
    "lookup": tool.step(
        input=Sku, output=Stock, on_start=_upper, run=lambda args: {"sku": args.sku, "stock": 7}
    ),
    "miscount": tool.step(input=Sku, output=Stock, run=lambda args: {"sku": args.sku, "stock": "many"}),
    "flaky": tool.step(input=Sku, output=Stock, run=_flaky),
    "awaitPayment": tool.group(input=Sku, run=_await_payment),
}

CHECKOUT = """
stock = await tools.lookup(sku="a1")
try:
    await tools.miscount(sku="b2")
except ToolError as exc:
    bad = exc.type
again = await tools.flaky(sku="c3")
paid = await tools.awaitPayment(sku="a1")
return {"stock": stock["stock"], "bad": bad, "again": again["stock"], "paid": paid["paid"]}
"""

OPTIONS = ToolOptions(retry_backoff=0.01, wait_window=0.05)


async def record_runs(journal: Path) -> None:
    """Record ``order-42`` (entered twice) and ``refund-7`` (failed) in ``journal``."""
    async with Bridge(journal=journal) as bridge:
        async with bridge.run("order-42") as step:
            await step.run("legacy-check", lambda: "ok")
        async with bridge.run("order-42") as step:
            await step.run("reserve", lambda: {"reserved": True})
            await step.sandbox.python("checkout", CHECKOUT, tools=TOOLS, tool_options=OPTIONS)
        try:
            async with bridge.run("refund-7") as step:
                await step.run("refund", _refuse)
        except Exception:
            pass  # recorded as failed, which is what the view should show


def _refuse() -> None:
    raise ToolError("the card was already refunded", type="AlreadyRefunded")
