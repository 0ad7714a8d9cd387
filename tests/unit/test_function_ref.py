"""``function_ref("refund")``: a tool naming a durable function by id, found when it is called."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from toolbridge import Bridge, FunctionContext, ToolError, event_type, function_ref
from toolbridge._tools.convert import to_tool
from toolbridge._tools.functions import make_function
from toolbridge.testing import FakeLauncher, FakeSandbox, tool_context


class Refund(BaseModel):
    order_id: str


async def _agent(sandbox: FakeSandbox) -> int:
    result = await sandbox.call("refund", order_id="o1")
    sandbox.write(f"{result}\n")
    for bad in ({"orderId": 1}, {}):
        try:
            await sandbox.call("refund", **bad)
        except ToolError as exc:
            sandbox.write(f"{exc.type}\n")
    return 0


async def test_a_reference_resolves_at_call_time_and_checks_the_trigger_schema(tmp_path: Path) -> None:
    launcher = FakeLauncher(_agent)
    async with launcher.bridge(tmp_path / "journal.db") as bridge:
        tools = {"refund": function_ref("refund")}  # given before the function exists

        @bridge.function(id="refund", trigger=event_type("order/refund", schema=Refund))
        async def refund(ctx: FunctionContext) -> dict[str, Any]:
            return {"refunded": ctx.event.data["order_id"], "run": ctx.run_id}

        async with bridge.run("order-1") as step:
            result = await step.sandbox.commands.run("agent", ["agent"], tools=tools)
            invoked = await step.invoke("again", function=function_ref("refund"), data={"order_id": "o2"})
            by_id = await step.invoke("by-id", function="refund", data={"order_id": "o3"})
    assert result.stdout == "{'refunded': 'o1', 'run': 'order-1'}\nValidationError\nValidationError\n"
    assert invoked["refunded"] == "o2"
    assert by_id["refunded"] == "o3"


async def test_a_reference_nobody_declared_fails_with_a_clear_tool_error(tmp_path: Path) -> None:
    async with Bridge(journal=tmp_path / "j.db", tools={"refund": function_ref("refund")}) as bridge:
        with pytest.raises(ToolError, match=r"no daemon of this journal serves function 'refund'") as missing:
            await bridge.call_tool("refund", {"order_id": "o1"})
        async with bridge.run("r") as step:
            with pytest.raises(ToolError, match="no daemon of this journal serves function 'nope'"):
                await step.invoke("x", function="nope")
    assert missing.value.type == "FunctionNotFound"


async def test_a_reference_runs_directly_with_the_functions_of_a_test_context() -> None:
    async def refund(ctx: FunctionContext) -> str:
        return f"refunded {ctx.event.data['order_id']}"

    declared = make_function(
        refund, id="refund", trigger=event_type("order/refund", schema=Refund), description=None
    )
    ctx = tool_context(functions=[declared])
    assert await to_tool(function_ref("refund")).invoke({"order_id": "o1"}, ctx) == "refunded o1"
    with pytest.raises(ToolError, match="serves function 'refund'"):
        await to_tool(function_ref("refund")).invoke({"order_id": "o1"})


@pytest.mark.parametrize(
    "handler",
    [lambda: 1, lambda ctx, extra: 1, lambda *, ctx: 1],
    ids=["no-argument", "two-arguments", "keyword-only"],
)
def test_a_durable_function_handler_signature_is_checked_when_declared(
    journal_path: Path, handler: Any
) -> None:
    bridge = Bridge(journal=journal_path)
    with pytest.raises(TypeError, match=r"handler of durable function 'f' takes .* must take one argument"):
        bridge.function(id="f")(handler)

    def with_default(ctx: FunctionContext, extra: int = 1) -> int:
        return extra

    bridge.function(id="ok")(with_default)  # a default is fine
    bridge.function(id="ok2")(print)
