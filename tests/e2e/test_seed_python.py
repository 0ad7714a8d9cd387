"""The seed's Python example, unchanged, against a real daemon and a real subprocess."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from toolbridge import Bridge, tool

SEED_AGENT = """
import asyncio
from inngest_tools import tools

async def main():
    customer = await tools.getCustomer("cus_1")
    print(customer["name"], customer["seats"])

asyncio.run(main())
"""

CUSTOMERS = {"cus_1": {"name": "Acme", "seats": 12}}


class CustomerId(BaseModel):
    id: str


class Customer(BaseModel):
    name: str
    seats: int


async def test_seed_agent_calls_a_plain_tool(
    bridge: Bridge, script: Callable[[str, str], Path], tmp_path: Path
) -> None:
    script("agent.py", SEED_AGENT)
    looked_up: list[str] = []

    def get_customer(customer_id: str) -> dict[str, object]:
        looked_up.append(customer_id)
        return CUSTOMERS[customer_id]

    async with bridge.run("order-42") as step:
        result = await step.sandbox.commands.run(
            "agent", "python agent.py", tools={"getCustomer": get_customer}, cwd=tmp_path
        )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Acme 12\n"
    assert looked_up == ["cus_1"]


async def test_runner_snippet_uses_a_step_tool(bridge: Bridge) -> None:
    get_customer = tool.step(
        description="Look up a customer by ID",
        input=CustomerId,
        output=Customer,
        run=lambda args, ctx: CUSTOMERS[args.id],
    )
    async with bridge.run("order-43") as step:
        total = await step.sandbox.python(
            "total",
            'customer = await tools.getCustomer(id="cus_1")\nreturn customer["seats"] * 10',
            tools={"getCustomer": get_customer},
            output=int,
        )
    assert total == 120
