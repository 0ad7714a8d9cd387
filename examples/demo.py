"""The toolbridge demo: a sandboxed script calls host tools that hold a (fake) database client.

Run it with `make demo`. Everything is real: a gRPC daemon on a Unix socket, a SQLite journal,
and the script in its own bubblewrap sandbox that reaches the tools only through `inngest_tools`.

A refund above 1000 waits for a person: the demo prints the `toolbridge approvals` command to
decide it from another terminal, waits for that (TOOLBRIDGE_DEMO_WAIT seconds: 30 at a
terminal, none when unattended), then approves it itself.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from toolbridge import ApprovalError, Bridge, ToolOptions, tool

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
        "refund": tool.step(
            description="Refund an invoice",
            input=Refund,
            run=refund,
            # Decided per call, on the validated arguments: a big refund waits for a person.
            requires_confirmation=lambda args, ctx: args.amount > 1000,
            annotations={"destructiveHint": True},
        ),
    }


async def main(journal: Path) -> None:
    tools = make_tools(FakeDatabase(), tenant="acme")
    # Each command runs under bubblewrap: no network, a read-only view of only what the
    # interpreter needs, an unprivileged uid, its own pid namespace, resource limits.
    async with Bridge(journal=journal, sandbox="bwrap") as bridge:
        print(f"daemon serving on {bridge.address}; commands run under bubblewrap\n")
        async with bridge.run("demo-order-42") as step:
            asked = asyncio.Event()
            deciding = asyncio.ensure_future(decide_when_asked(bridge, "demo-order-42", journal, asked))
            result = await step.sandbox.commands.run(
                "agent",
                "python agent.py",
                tools=tools,
                cwd=HERE / "agent",
                tool_options=ToolOptions(tool_timeout="10s", max_calls=50),
            )
            if asked.is_set():  # it says who decided (it sees the decision within its next poll)
                await deciding
            else:
                deciding.cancel()
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


async def decide_when_asked(bridge: Bridge, run_id: str, journal: Path, asked: asyncio.Event) -> None:
    """Show the request the sandbox's call made, wait for a person to decide it from the CLI,
    then (nobody did) approve it here, as a person would."""
    while True:  # a demo polls; an app is told (bridge.approvals, the web view, MCP)
        pending = await bridge.approvals.list(run_id)
        if pending:
            break
        await asyncio.sleep(0.05)
    req = pending[0]
    asked.set()
    wait = float(os.environ.get("TOOLBRIDGE_DEMO_WAIT", "30" if sys.stdin.isatty() else "0"))
    print(f"\n--- the sandbox's call waits for a person: Approve {req.summary}? ---")
    print(f"decide it from another terminal:\n  toolbridge approvals approve {req.id} --journal {journal}")
    print(
        f"(or reject it: toolbridge approvals reject {req.id} --reason '...' --journal {journal})", flush=True
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while loop.time() < deadline:
        decided = await bridge.approvals.get(req.id)
        if decided.state != "pending":
            print(f"decided from the CLI: {decided.state} by {decided.decided_by}\n", flush=True)
            return
        await asyncio.sleep(0.2)
    # Unattended (no terminal), nobody can answer: say so rather than "within 0s".
    why = f"nobody decided within {wait:g}s" if wait > 0 else "unattended: nobody is at the terminal"
    try:
        await bridge.approvals.approve(req.id, by="the demo", reason=why)
        print(f"{why}: the demo approves it itself\n", flush=True)
    except ApprovalError as exc:  # decided from the CLI at the last moment
        print(f"decided from the CLI: {exc}\n", flush=True)


TOTAL = 'customer = await tools.getCustomer(id="cus_1")\nreturn customer["seats"] * 10'


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="toolbridge-demo-") as work:
        journal = Path(work) / "demo.db"
        asyncio.run(main(journal))
        print("\n--- the journal, as `toolbridge trace demo-order-42` shows it ---")
        toolbridge_cli = Path(sys.executable).with_name("toolbridge")
        subprocess.run([toolbridge_cli, "trace", "demo-order-42", "--journal", journal], check=True)
