"""AGNT5's Tool.invoke, run directly; and an agent (a durable function running a model loop) as a tool."""

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from toolbridge import Bridge, FunctionContext, ToolContext, event_type, tool
from toolbridge.testing import tool_context

# --8<-- [start:invoke]
echo = tool.step(
    name="echo",
    description="Echo the text back",
    input={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    run=lambda args, ctx: f"echo: {args['text']}",
)


async def invoke_directly() -> None:
    ctx = tool_context()  # a test context: ctx.step runs steps inline, ctx.state is a dict
    reply = await echo.invoke(ctx, {"text": "hi"})  # AGNT5's order; echo.invoke({...}) works too
    assert reply == "echo: hi"
    assert echo.schema()["requires_confirmation"] is False  # lookupOrder._tool.getSchema()


# --8<-- [end:invoke]


# --8<-- [start:agent]
class OrderId(BaseModel):
    orderId: str  # noqa: N815 (the model's field name)


def lookup_order_handler(args: OrderId, ctx: ToolContext) -> dict[str, str]:
    return {"orderId": args.orderId, "status": "shipped"}


lookup_order = tool.step(
    name="lookup_order", description="Look up an order by ID", input=OrderId, run=lookup_order_handler
)


class FakeModel:
    """Stands in for a model API: first asks for a tool, then answers with what it returned."""

    def reply(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        last = messages[-1]
        if last["role"] == "user":
            return {"tool": "lookup_order", "input": {"orderId": "A1"}}
        return {"text": f"Order A1 is {last['content']['status']}."}


class Question(BaseModel):
    question: str


async def main(journal: Path, sandbox: str = "process") -> None:
    model = FakeModel()
    async with Bridge(journal=journal, sandbox=sandbox) as bridge:  # type: ignore[arg-type]
        # The agent: a durable function running a model loop; each model turn and each tool
        # call is a step of its own, so a replay runs neither again.
        @bridge.function(id="orders", trigger=event_type("agent/orders", schema=Question))
        async def orders(ctx: FunctionContext) -> str:
            messages: list[dict[str, Any]] = [{"role": "user", "content": ctx.event.data["question"]}]
            for turn in range(5):
                reply = await ctx.step.run(f"model-{turn}", model.reply, messages)
                if "text" in reply:
                    return str(reply["text"])
                result = await ctx.step.run(f"tool-{turn}", lookup_order.invoke, reply["input"])
                messages.append({"role": "tool", "content": result})
            return "I could not answer."

        async with bridge.run("support-1") as step:
            # Given to the code in the sandbox as a tool named after the agent.
            answer = await step.sandbox.python(
                "ask", 'return await tools.orders(question="Where is order A1?")', tools={"orders": orders}
            )
    print(answer)
    assert answer == "Order A1 is shipped."


# --8<-- [end:agent]


if __name__ == "__main__":
    asyncio.run(invoke_directly())
    with tempfile.TemporaryDirectory() as work:
        asyncio.run(main(Path(work) / "journal.db"))
