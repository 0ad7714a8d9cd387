"""Your first sandboxed command: host tools, a bridge, a command that calls them."""

# --8<-- [start:tools]
import asyncio
from pathlib import Path

from pydantic import BaseModel

from toolbridge import Bridge, ToolOptions, tool

SANDBOX = Path(__file__).parent / "sandbox"  # where agent.py and agent.js live
CUSTOMERS = {"cus_1": {"name": "Acme Corp", "seats": 12}}  # stands in for your database
INVOICES = {"cus_1": [{"id": "inv_1", "amount": 1200}]}


class CustomerId(BaseModel):
    id: str


class Customer(BaseModel):
    name: str
    seats: int


get_customer = tool.step(
    description="Look up a customer by ID",
    input=CustomerId,
    output=Customer,
    run=lambda args, ctx: CUSTOMERS[args.id],  # ctx.idempotency_key is stable across retries
)
# --8<-- [end:tools]


async def main() -> None:
    # --8<-- [start:run]
    async with Bridge(journal="toolbridge.db") as bridge:  # serves gRPC while open
        async with bridge.run("order-42") as step:  # a durable run; same id again = replay
            result = await step.sandbox.commands.run(
                "agent",
                "python agent.py",
                cwd=SANDBOX,
                tools={
                    "getCustomer": get_customer,
                    "listInvoices": lambda customer_id: INVOICES[customer_id],  # live scope
                },
                tool_options=ToolOptions(tool_timeout=10, max_calls=50),
            )
            print(result.exit_code, result.stdout)
    # --8<-- [end:run]
    assert result.exit_code == 0, result.stderr
    assert "Acme Corp: 1 invoices" in result.stdout
    assert "ValidationError" in result.stdout


asyncio.run(main())
