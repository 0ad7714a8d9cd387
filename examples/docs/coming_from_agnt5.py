"""AGNT5's tool() and Tool, in toolbridge's form (each part runs)."""

import asyncio
from typing import Any

from toolbridge import Bridge, ToolContext, ask_user, request_approval, tool
from toolbridge.testing import tool_context

# --8<-- [start:tool]
ORDER_ID = {"type": "object", "properties": {"orderId": {"type": "string"}}, "required": ["orderId"]}


def find_order(input: Any, ctx: ToolContext) -> dict[str, str]:  # (input, ctx): the other order
    return {"orderId": input["orderId"], "status": "shipped"}


lookup_order = tool.step(
    name="lookup_order", description="Look up an order by ID", input=ORDER_ID, run=find_order
)

# AGNT5's lookupOrder._tool.getSchema():
assert lookup_order.schema() == {
    "name": "lookup_order",
    "description": "Look up an order by ID",
    "input_schema": ORDER_ID,
    "requires_confirmation": False,
}
# --8<-- [end:tool]

# --8<-- [start:class]
echo = tool.step(
    name="echo",
    description="Echo the text back",
    input={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    run=lambda input, ctx: f"echo: {input['text']}",
)


async def call_it_directly() -> None:
    reply = await echo.invoke(tool_context(), {"text": "hi"})  # AGNT5's echo.invoke(ctx, {...})
    assert reply == "echo: hi"  # validated and hooked, not journaled: no bridge involved


# --8<-- [end:class]


async def main() -> None:
    await call_it_directly()
    # --8<-- [start:call]
    bridge = Bridge(journal="toolbridge.db", tools=[lookup_order, echo])
    async with bridge:
        # AGNT5's `await lookupOrder(ctx, { orderId: 'A1' })`: a durable call of its own run
        order = await bridge.call_tool("lookup_order", {"orderId": "A1"})
        # ... and tools given to code (the agent) as a list of named tools, people included
        async with bridge.run("agnt5-1") as step:
            reply = await step.sandbox.python(
                "agent",
                'return await tools.echo(text="hi")',
                tools=[lookup_order, echo, ask_user(), request_approval()],
            )
    # --8<-- [end:call]
    assert order == {"orderId": "A1", "status": "shipped"}
    assert reply == "echo: hi"


asyncio.run(main())
