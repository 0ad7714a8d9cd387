"""The Inngest sandbox-tools seed, API by API, in toolbridge's form (each part runs)."""

import asyncio
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from toolbridge import (
    Bridge,
    FunctionContext,
    ToolContext,
    ToolOptions,
    event_type,
    function_ref,
    tool,
    tool_definitions,
)

SANDBOX = Path(__file__).parent / "sandbox"
CUSTOMERS = {"cus_1": {"name": "Acme Corp", "seats": 12}}
bridge = Bridge(journal="toolbridge.db")


# --8<-- [start:step]
class CustomerId(BaseModel):
    id: str


class Customer(BaseModel):
    name: str


def find_customer(args: CustomerId, ctx: ToolContext) -> dict[str, Any]:
    # ctx.idempotency_key: the seed's `idempotencyKey`, the same across retries
    return CUSTOMERS[args.id]


get_customer = tool.step(
    description="Look up a customer by ID",
    input=CustomerId,  # a pydantic model (or a JSON Schema dict) where the seed takes Zod
    output=Customer,
    run=find_customer,
)
# --8<-- [end:step]


# --8<-- [start:function]
class OrderId(BaseModel):
    order_id: str


@bridge.function(id="refund", trigger=event_type("order/refund", schema=OrderId))
async def refund_fn(ctx: FunctionContext) -> dict[str, Any]:
    return {"order_id": ctx.event.data["order_id"], "refunded": True}


# --8<-- [end:function]


# --8<-- [start:group]
async def refund_order(args: OrderId, ctx: ToolContext) -> Any:
    result = await ctx.step.invoke("refund", function=refund_fn, data={"order_id": args.order_id})
    await ctx.step.send_event("notify", {"name": "order/refunded", "data": result})
    return result


refund = tool.group(input=OrderId, run=refund_order)
# --8<-- [end:group]


async def main() -> None:
    async with bridge, bridge.run("seed-42") as step:
        # --8<-- [start:commands]
        result = await step.sandbox.commands.run(
            "agent",
            "node agent.js",
            cwd=SANDBOX,
            tools={
                "getCustomer": get_customer,
                "listInvoices": lambda customer_id: [],  # a plain function: positional arguments
            },
            tool_options=ToolOptions(tool_timeout="10s", max_calls=50),  # or seconds: tool_timeout=10
        )
        # --8<-- [end:commands]
        assert result.exit_code == 0, result.stderr

        # --8<-- [start:runner]
        total = await step.sandbox.python(
            "total",
            'customer = await tools.getCustomer("cus_1")\nreturn customer["seats"] * 10',
            tools={"getCustomer": lambda id: CUSTOMERS[id]},
            output=int,  # the seed's schema: { output: z.number() }
        )
        # --8<-- [end:runner]
        assert total == 120

        # --8<-- [start:reference]
        refunded = await step.sandbox.python(
            "refunds",
            'return [await tools.refund(order_id="o-1"), await tools.refundFn(order_id="o-2"),'
            ' await tools.refundRef(order_id="o-3")]',
            tools={
                "refund": refund,  # a tool.group
                "refundFn": refund_fn,  # the function itself
                "refundRef": function_ref("refund"),  # referenceFunction(): found by id at call time
            },
        )
        # --8<-- [end:reference]
        assert [item["order_id"] for item in refunded] == ["o-1", "o-2", "o-3"], refunded

    # --8<-- [start:definitions]
    definitions = tool_definitions({"getCustomer": get_customer})  # Anthropic's shape
    for_openai = tool_definitions({"getCustomer": get_customer}, format="openai")  # no mapping by hand
    # --8<-- [end:definitions]
    assert definitions[0]["name"] == for_openai[0]["name"] == "getCustomer"
    assert set(definitions[0]) == {"name", "description", "input_schema"}


asyncio.run(main())
