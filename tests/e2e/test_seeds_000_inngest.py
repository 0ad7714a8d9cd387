"""Seed 000 (Inngest sandbox tools), written as its users write it, under both launchers.

Each sandbox snippet is the seed's own; the host side is the seed's TypeScript in Python, as
DESIGN.md maps it (``tool.step(input=, output=, run=)``, ``bridge.function``, ``ToolOptions``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
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

LAUNCHERS = ["process", pytest.param("bwrap", marks=pytest.mark.bwrap)]


@pytest.fixture(params=LAUNCHERS)
async def bridge(request: pytest.FixtureRequest, journal_path: Path) -> AsyncIterator[Bridge]:
    async with Bridge(journal=journal_path, sandbox=request.param) as opened:
        yield opened


def workdir(tmp_path: Path, **files: str) -> Path:
    """A folder the sandbox user may read (bwrap runs the code as an unprivileged uid)."""
    work = tmp_path / "work"
    work.mkdir(mode=0o755)
    work.chmod(0o755)
    for name, text in files.items():
        (work / name.replace("_", ".")).write_text(text)
        (work / name.replace("_", ".")).chmod(0o644)
    return work


class Customers:
    """``db.customers``: the live scope a tool closes over."""

    def __init__(self) -> None:
        self.rows = {"cus_1": {"name": "Acme", "seats": 12}}
        self.keys: list[str] = []

    def find(self, id: str) -> dict[str, Any]:
        return self.rows[id]


class CustomerId(BaseModel):
    id: str


class Customer(BaseModel):
    name: str


class OrderRefund(BaseModel):
    orderId: str  # noqa: N815 (the seed's field name)


AGENT_JS = """
// agent.js
const { tools } = require("inngest_tools");

async function main() {
  const customer = await tools.getCustomer("cus_1");
  console.log(customer.name);
}

main();
"""

AGENT_PY = """
# agent.py
import asyncio
from inngest_tools import tools

async def main():
    customer = await tools.getCustomer("cus_1")
    print(customer["name"])

asyncio.run(main())
"""


async def test_give_a_command_a_tool_in_node_and_python(bridge: Bridge, tmp_path: Path) -> None:
    db = Customers()
    work = workdir(tmp_path, agent_js=AGENT_JS, agent_py=AGENT_PY)
    async with bridge.run("seed-000-commands") as step:
        for command in ("node agent.js", "python agent.py"):
            result = await step.sandbox.commands.run(
                "agent",
                command,
                tools={"getCustomer": lambda id: db.find(id)},  # getCustomer: (id) => db.customers.find(id)
                cwd=work,
            )
            assert (result.exit_code, result.stdout) == (0, "Acme\n"), result.stderr


async def test_tools_in_a_runner_and_tool_step_with_idempotency_key(bridge: Bridge, tmp_path: Path) -> None:
    db = Customers()

    def run(args: CustomerId, ctx: ToolContext) -> dict[str, Any]:  # run: async ({ id }, { idempotencyKey })
        db.keys.append(ctx.idempotency_key)
        return db.find(args.id)

    get_customer = tool.step(
        description="Look up a customer by ID", input=CustomerId, output=Customer, run=run
    )
    async with bridge.run("seed-000-runner") as step:
        total = await step.sandbox.python(
            "total",
            'customer = await tools.getCustomer(id="cus_1")\nreturn customer["name"] * 2',
            tools={"getCustomer": get_customer},
            output=str,
        )
        node = await step.sandbox.typescript(
            "node",
            'const customer = await tools.getCustomer({ id: "cus_1" });\nreturn customer.name;',
            tools={"getCustomer": get_customer},
            output=str,
        )
        refused = await step.sandbox.python(
            "bad",
            "try:\n    await tools.getCustomer(id=1)\nexcept ToolError as e:\n    return e.type",
            tools={"getCustomer": get_customer},
            output=str,
        )
    assert (total, node, refused) == ("AcmeAcme", "Acme", "ValidationError")
    assert len(db.keys) == 2
    assert all(key.startswith("tbk_") for key in db.keys)


async def test_a_group_invokes_a_function_and_functions_and_references_are_tools(
    bridge: Bridge, tmp_path: Path
) -> None:
    issued: list[str] = []

    @bridge.function(id="refund", trigger=event_type("order/refund", schema=OrderRefund))
    async def refund_fn(ctx: FunctionContext) -> dict[str, Any]:  # async ({ event }) => issueRefund(...)
        issued.append(ctx.event.data["orderId"])
        return {"refunded": ctx.event.data["orderId"]}

    async def group_run(args: OrderRefund, ctx: ToolContext) -> Any:
        result = await ctx.step.invoke("refund", function=refund_fn, data={"orderId": args.orderId})
        await ctx.step.send_event("notify", {"name": "order/refunded", "data": result})
        return result

    refund = tool.group(input=OrderRefund, run=group_run)
    code = (
        'a = await tools.refund(orderId="o1")\n'
        'b = await tools.refundFn(orderId="o2")\n'
        'c = await tools.refundRef(orderId="o3")\n'
        "return [a, b, c]"
    )
    async with bridge.run("seed-000-functions") as step:
        results = await step.sandbox.python(
            "refunds",
            code,
            tools={"refund": refund, "refundFn": refund_fn, "refundRef": function_ref("refund")},
            tool_options=ToolOptions(tool_timeout="10s", max_calls=50, wait_window="20s"),
        )
    assert results == [{"refunded": "o1"}, {"refunded": "o2"}, {"refunded": "o3"}]
    assert issued == ["o1", "o2", "o3"]


async def test_tool_definitions_for_a_model(bridge: Bridge) -> None:
    get_customer = tool.step(description="Look up a customer by ID", input=CustomerId, run=lambda a, c: {})
    (definition,) = tool_definitions({"getCustomer": get_customer})  # toolDefinitions({ getCustomer })
    assert sorted(definition) == ["description", "input_schema", "name"]
    assert (definition["name"], definition["description"]) == ("getCustomer", "Look up a customer by ID")
    assert definition["input_schema"]["required"] == ["id"]
    (openai,) = tool_definitions({"getCustomer": get_customer}, format="openai")
    assert (openai["type"], openai["parameters"]) == ("function", definition["input_schema"])
