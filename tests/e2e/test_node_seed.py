"""The seed's Node example, unchanged, against a real daemon and a real `node` process, under
the process launcher and under bubblewrap."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from pydantic import BaseModel

from tests.e2e.node_launchers import LAUNCHERS
from toolbridge import Bridge, tool

# Copied verbatim from the seed (shared/seeds/000_*.txt): no import of ours, no exit call.
SEED_AGENT = """
// agent.js
const { tools } = require("inngest_tools");

async function main() {
  const customer = await tools.getCustomer("cus_1");
}

main();
"""

CUSTOMERS = {"cus_1": {"name": "Acme", "seats": 12}}


@pytest.fixture(params=LAUNCHERS)
async def bridge(journal_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Bridge]:
    async with Bridge(journal=journal_path, sandbox=request.param) as opened:
        yield opened


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The command's folder, readable by bubblewrap's sandbox user (pytest's own are 0700)."""
    path = tmp_path / "work"
    path.mkdir(mode=0o755)
    path.chmod(0o755)
    return path


@pytest.fixture
def script(work: Path) -> Callable[[str, str], Path]:
    def write(name: str, code: str) -> Path:
        path = work / name
        path.write_text(textwrap.dedent(code).lstrip())
        path.chmod(0o644)
        return path

    return write


class CustomerId(BaseModel):
    id: str


class Customer(BaseModel):
    name: str
    seats: int


async def test_seed_agent_runs_unchanged_against_a_plain_tool(
    bridge: Bridge, script: Callable[[str, str], Path], work: Path
) -> None:
    script("agent.js", SEED_AGENT)
    looked_up: list[str] = []

    def get_customer(customer_id: str) -> dict[str, object]:
        looked_up.append(customer_id)
        return CUSTOMERS[customer_id]

    async with bridge.run("order-42") as step:
        result = await step.sandbox.commands.run(
            "agent", "node agent.js", tools={"getCustomer": get_customer}, cwd=work
        )
    assert result.exit_code == 0, result.stderr
    assert result.stopped is None
    assert looked_up == ["cus_1"]
    assert not (work / "node_modules").exists()


async def test_named_call_reaches_a_step_tool_validated(
    bridge: Bridge, script: Callable[[str, str], Path], work: Path
) -> None:
    script(
        "agent.js",
        """
        const { tools } = require("inngest_tools");

        async function main() {
          const customer = await tools.getCustomer({ id: "cus_1" });
          console.log(customer.name, customer.seats);
        }

        main();
        """,
    )
    seen: list[CustomerId] = []

    def run(args: CustomerId) -> dict[str, object]:
        seen.append(args)
        return CUSTOMERS[args.id]

    get_customer = tool.step(
        description="Look up a customer by ID", input=CustomerId, output=Customer, run=run
    )
    async with bridge.run("order-43") as step:
        result = await step.sandbox.commands.run(
            "agent", "node agent.js", tools={"getCustomer": get_customer}, cwd=work
        )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Acme 12\n"
    assert seen == [CustomerId(id="cus_1")]
