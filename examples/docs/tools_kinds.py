"""The four kinds of tool: a plain function, tool.step, tool.group and a durable function."""

import asyncio
from typing import Any

from pydantic import BaseModel

from toolbridge import Bridge, FunctionContext, ToolContext, event_type, tool


# --8<-- [start:plain]
def list_invoices(customer_id: str, limit: int = 10) -> list[dict[str, Any]]:
    """List a customer's invoices, newest first.

    Args:
        customer_id: The customer's id, like cus_1.
        limit: Most invoices to return.
    """
    return [{"id": "inv_1", "amount": 1200}][:limit]


# --8<-- [end:plain]


# --8<-- [start:step]
class Refund(BaseModel):
    order_id: str
    amount: int


def issue_refund(args: Refund, ctx: ToolContext) -> dict[str, Any]:
    # ctx.idempotency_key is the same for every attempt and every replay of this call: pass
    # it to an API that deduplicates writes.
    return {"order_id": args.order_id, "refunded": args.amount, "key": ctx.idempotency_key}


refund_now = tool.step(description="Refund an order", input=Refund, run=issue_refund)
# --8<-- [end:step]

bridge = Bridge(journal="toolbridge.db")


# --8<-- [start:function]
class OrderId(BaseModel):
    order_id: str


@bridge.function(id="refund", trigger=event_type("order/refund", schema=OrderId))
async def refund_fn(ctx: FunctionContext) -> dict[str, Any]:
    order = await ctx.step.run("load", lambda: {"id": ctx.event.data["order_id"], "total": 80})
    return {"order_id": order["id"], "refunded": order["total"]}


# --8<-- [end:function]


# --8<-- [start:group]
async def refund_order(args: OrderId, ctx: ToolContext) -> Any:
    # Each step is journaled under this call: a retried or replayed call skips those done.
    checks = await asyncio.gather(
        ctx.step.run("fraud", lambda: "ok"),
        ctx.step.run("stock", lambda: "ok"),
    )
    assert list(checks) == ["ok", "ok"]
    result = await ctx.step.invoke("refund", function=refund_fn, data={"order_id": args.order_id})
    await ctx.step.send_event("notify", {"name": "order/refunded", "data": result})
    return result


refund_with_steps = tool.group(input=OrderId, run=refund_order)
# --8<-- [end:group]

SNIPPET = """
invoices = await tools.listInvoices("cus_1")             # positional
now = await tools.refundNow(order_id="o-1", amount=5)    # named, validated
grouped = await tools.refundOrder(order_id="o-2")        # a group of durable steps
direct = await tools.refundFn(order_id="o-3")            # a durable function: event data
return [len(invoices), now["refunded"], grouped["refunded"], direct["refunded"]]
"""


async def main() -> None:
    # --8<-- [start:use]
    async with bridge, bridge.run("tools-42") as step:
        values = await step.sandbox.python(
            "calls",
            SNIPPET,
            tools={
                "listInvoices": list_invoices,
                "refundNow": refund_now,
                "refundOrder": refund_with_steps,
                "refundFn": refund_fn,
            },
        )
    # --8<-- [end:use]
    assert values == [1, 5, 80, 80], values


asyncio.run(main())
