"""`step.sandbox.typescript`: TypeScript snippets with `tools` defined, run by real Node."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tests.e2e.node_launchers import LAUNCHERS
from toolbridge import Bridge, SnippetError, ToolError, tool


class CustomerId(BaseModel):
    id: str


class Customer(BaseModel):
    name: str
    seats: int


CUSTOMERS = {"cus_1": {"name": "Acme", "seats": 12}}


@pytest.fixture(params=LAUNCHERS)
async def bridge(journal_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Bridge]:
    """Each test under both launchers; its folder readable by bubblewrap's sandbox user."""
    journal_path.parent.chmod(0o755)  # pytest's tmp_path is 0700; scripts are written 0644
    async with Bridge(journal=journal_path, sandbox=request.param) as opened:
        yield opened


async def test_a_snippet_calls_a_step_tool_and_returns_a_validated_value(bridge: Bridge) -> None:
    looked_up: list[str] = []

    def run(args: CustomerId) -> dict[str, Any]:
        looked_up.append(args.id)
        return CUSTOMERS[args.id]

    get_customer = tool.step(
        description="Look up a customer by ID", input=CustomerId, output=Customer, run=run
    )
    code = """
    interface Customer { name: string; seats: number }
    const customer: Customer = await tools.getCustomer({ id: "cus_1" });
    const listed = await definitions();
    return customer.seats * 10 + listed.length;
    """
    async with bridge.run("order-43") as step:
        total = await step.sandbox.typescript("total", code, tools={"getCustomer": get_customer}, output=int)
    assert total == 121
    # Entering the run again replays the snippet from the journal: nothing runs.
    async with bridge.run("order-43") as step:
        again = await step.sandbox.typescript("total", code, tools={"getCustomer": get_customer}, output=int)
    assert again == 121
    assert looked_up == ["cus_1"]


async def test_a_tool_error_the_snippet_does_not_catch_fails_the_step(bridge: Bridge) -> None:
    def refund(order_id: str) -> None:
        raise ToolError(f"order {order_id} was already refunded", type="AlreadyRefunded")

    async with bridge.run("refund") as step:
        caught = await step.sandbox.typescript(
            "caught",
            'try { await tools.refund("o_1"); } catch (e) { return e instanceof ToolError ? e.type : "?"; }',
            tools={"refund": refund},
        )
        assert caught == "AlreadyRefunded"
        with pytest.raises(SnippetError) as failed:
            await step.sandbox.typescript("uncaught", 'await tools.refund("o_2");', tools={"refund": refund})
    assert failed.value.exit_code == 1
    assert "ToolError: AlreadyRefunded: order o_2 was already refunded" in str(failed.value)


async def test_a_value_that_fails_output_or_is_not_json_fails_the_step(bridge: Bridge) -> None:
    async with bridge.run("values") as step:
        with pytest.raises(SnippetError, match="does not match output"):
            await step.sandbox.typescript("wrong", 'return "twelve";', output=int)
        with pytest.raises(SnippetError) as not_json:
            await step.sandbox.typescript("nan", "return NaN;")
        with pytest.raises(SnippetError) as syntax:
            await step.sandbox.typescript("syntax", "const x: number = ;")
    assert not_json.value.exit_code == 3
    assert "not JSON" in not_json.value.stderr
    assert "snippet.ts:1:19" in syntax.value.stderr
