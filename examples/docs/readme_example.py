import asyncio

from pydantic import BaseModel

from toolbridge import Bridge, tool


class CustomerId(BaseModel):
    id: str


get_customer = tool.step(
    description="Look up a customer by ID",
    input=CustomerId,  # validated before the tool runs; a bad call gets a ToolError
    run=lambda args, ctx: {"name": "Acme Corp", "seats": 12},  # your database client here
)

AGENT = 'customer = await tools.getCustomer(id="cus_1")\nreturn customer["seats"] * 10'


async def main() -> None:
    async with Bridge(journal="toolbridge.db") as bridge:  # serves the tools while open
        async with bridge.run("order-42") as step:  # a durable run: the same id again replays
            total = await step.sandbox.python("total", AGENT, tools={"getCustomer": get_customer}, output=int)
            # or a whole program: await step.sandbox.commands.run("agent", "node agent.js", tools=...)
    print(total)  # 120


asyncio.run(main())
