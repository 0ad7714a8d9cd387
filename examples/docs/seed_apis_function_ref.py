"""Inngest's referenceFunction(): function_ref("refund") names a durable function by id."""

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from toolbridge import Bridge, FunctionContext, event_type, function_ref


class OrderRefund(BaseModel):
    orderId: str  # noqa: N815 (the seed's field name)


# --8<-- [start:ref]
# tools.py: the tool names the function by id; it need not import the module declaring it.
TOOLS = {"refund": function_ref("refund", description="Refund an order")}


# functions.py: the function, declared on the bridge that serves the calls.
def declare(bridge: Bridge) -> None:
    @bridge.function(id="refund", trigger=event_type("order/refund", schema=OrderRefund))
    async def refund(ctx: FunctionContext) -> dict[str, Any]:
        return {"refunded": ctx.event.data["orderId"]}


SNIPPET = """
done = await tools.refund(orderId="o1")
try:
    await tools.refund(order="o1")  # checked against the trigger's schema
except ToolError as error:
    return [done, error.type]
"""
# --8<-- [end:ref]


async def main(journal: Path) -> None:
    async with Bridge(journal=journal) as bridge:
        async with bridge.run("before") as step:  # nobody declared it yet: a clear ToolError
            missing = await step.sandbox.python(
                "call",
                "try:\n    await tools.refund(orderId='o1')\nexcept ToolError as e:\n    return e.type",
                tools=TOOLS,
            )
        declare(bridge)
        async with bridge.run("after") as step:
            result = await step.sandbox.python("call", SNIPPET, tools=TOOLS)
    print(missing, result)
    assert missing == "FunctionNotFound"
    assert result == [{"refunded": "o1"}, "ValidationError"]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as work:
        asyncio.run(main(Path(work) / "journal.db"))
