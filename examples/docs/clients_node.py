"""The same tools called from Node: `node agent.js` needs nothing installed in its folder."""

import asyncio
from pathlib import Path

from toolbridge import Bridge, tool

SANDBOX = Path(__file__).parent / "sandbox"

get_customer = tool.step(
    name="getCustomer",
    description="Look up a customer by ID",
    input={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    run=lambda args, ctx: {"name": "Acme Corp", "seats": 12},
)


async def main() -> None:
    async with Bridge(journal="toolbridge.db") as bridge, bridge.run("node-42") as step:
        result = await step.sandbox.commands.run(
            "agent",
            "node agent.js",
            cwd=SANDBOX,
            tools=[get_customer, tool.step(name="listInvoices", run=lambda args, ctx: [])],
        )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == "Acme Corp: 0 invoices", result.stdout
    assert result.stdout.splitlines()[1].startswith("ValidationError"), result.stdout
    assert result.stdout.splitlines()[2] == "getCustomer,listInvoices", result.stdout


asyncio.run(main())
