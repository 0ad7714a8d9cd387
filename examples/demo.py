"""The toolbridge demo: a sandboxed script calls host tools that hold a (fake) database client.

Run it with `make demo`. Everything is real: a gRPC daemon on a Unix socket, a SQLite journal,
and the script in its own bubblewrap sandbox that reaches the tools only through `inngest_tools`.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from toolbridge import Bridge, ToolError, ToolOptions, tool

HERE = Path(__file__).resolve().parent


class FakeDatabase:
    """Stands in for a client that holds credentials the sandbox must never see."""

    def __init__(self) -> None:
        self.password = "s3cr3t-never-in-the-sandbox"
        self.customers = {"cus_1": {"name": "Acme Corp", "seats": 12}}
        self.invoices = {"cus_1": [{"id": "inv_1", "amount": 1200}, {"id": "inv_2", "amount": 300}]}


class CustomerId(BaseModel):
    id: str = Field(description="The customer's id, like cus_1")


class Customer(BaseModel):
    name: str
    seats: int


class Refund(BaseModel):
    invoice_id: str
    amount: int = Field(gt=0)


def make_tools(db: FakeDatabase, tenant: str) -> dict[str, object]:
    def refund(args: Refund, ctx: object) -> dict[str, str]:
        if args.amount > 1000:
            raise ToolError("refunds above 1000 need a person's approval", type="NeedsApproval")
        return {"status": "refunded"}

    return {
        "getCustomer": tool.step(
            description="Look up a customer by ID",
            input=CustomerId,
            output=Customer,
            run=lambda args, ctx: db.customers[args.id],
        ),
        # A plain function closing over live scope (the tenant), called with positional args.
        "listInvoices": lambda customer_id: db.invoices[customer_id] if tenant == "acme" else [],
        "refund": tool.step(description="Refund an invoice", input=Refund, run=refund),
    }


async def main(journal: Path) -> None:
    tools = make_tools(FakeDatabase(), tenant="acme")
    # Each command runs under bubblewrap: no network, a read-only view of only what the
    # interpreter needs, an unprivileged uid, its own pid namespace, resource limits.
    async with Bridge(journal=journal, sandbox="bwrap") as bridge:
        print(f"daemon serving on {bridge.address}; commands run under bubblewrap\n")
        async with bridge.run("demo-order-42") as step:
            result = await step.sandbox.commands.run(
                "agent",
                "python agent.py",
                tools=tools,
                cwd=HERE / "agent",
                tool_options=ToolOptions(tool_timeout=10, max_calls=50),
            )
            print("--- the sandboxed script printed ---")
            print(result.stdout, end="")
            if result.exit_code != 0:
                raise SystemExit(f"the agent failed:\n{result.stderr}")
            total = await step.sandbox.python("total", TOTAL, tools=tools, output=int)
            print(f"--- a runner snippet returned: {total} ---\n")

        # Entering the same run again replays it from the journal: nothing runs twice.
        async with bridge.run("demo-order-42") as step:
            replayed = await step.sandbox.commands.run(
                "agent", "python agent.py", tools=tools, cwd=HERE / "agent"
            )
            # The same code: a replay checks that the step is the one recorded (another snippet
            # under this id would raise ReplayMismatchError), then returns its recorded value.
            total_again = await step.sandbox.python("total", TOTAL, tools=tools, output=int)
            print(f"replayed from the journal without running: {replayed.replayed}, total {total_again}")


TOTAL = 'customer = await tools.getCustomer(id="cus_1")\nreturn customer["seats"] * 10'


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="toolbridge-demo-") as work:
        journal = Path(work) / "demo.db"
        asyncio.run(main(journal))
        print("\n--- the journal, as `toolbridge trace demo-order-42` shows it ---")
        toolbridge_cli = Path(sys.executable).with_name("toolbridge")
        subprocess.run([toolbridge_cli, "trace", "demo-order-42", "--journal", journal], check=True)
