"""``Bridge.call_tool``: a registered tool called by the host, as a durable step (what
``toolbridge call`` runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from toolbridge import Bridge, ToolbridgeError, ToolContext, ToolError, ToolOptions, tool
from toolbridge._journal.sqlite import SQLiteJournal
from toolbridge._records import RunSummary, StepRecord


class CustomerId(BaseModel):
    id: str


CUSTOMERS = {"cus_1": {"name": "Acme", "seats": 12}}


async def journal_contents(path: Path, run_id: str) -> tuple[RunSummary | None, list[StepRecord]]:
    journal = SQLiteJournal(path)
    await journal.open()
    try:
        return await journal.get_run(run_id), await journal.load_steps(run_id)
    finally:
        await journal.close()


async def test_a_registered_tool_runs_as_a_top_level_step_and_replays(journal_path: Path) -> None:
    looked_up: list[str] = []
    keys: list[str] = []

    def get_customer(args: CustomerId, ctx: ToolContext) -> dict[str, Any]:
        looked_up.append(args.id)
        keys.append(ctx.idempotency_key)
        return CUSTOMERS[args.id]

    tools = {"getCustomer": tool.step(input=CustomerId, run=get_customer)}
    async with Bridge(journal=journal_path, tools=tools) as bridge:
        first = await bridge.call_tool("getCustomer", {"id": "cus_1"}, run_id="lookup-1")
        again = await bridge.call_tool("getCustomer", {"id": "cus_1"}, run_id="lookup-1")
        other = await bridge.call_tool("getCustomer", {"id": "cus_1"})
    assert first == again == other == {"name": "Acme", "seats": 12}
    assert looked_up == ["cus_1", "cus_1"]  # the replay ran nothing; a fresh run did
    assert keys[0] != keys[1]
    run, steps = await journal_contents(journal_path, "lookup-1")
    assert run is not None
    assert run.status == "completed"
    assert run.entries == 2
    (step,) = steps
    assert step.kind == "tool"
    assert step.parent_key is None
    assert step.key.startswith("getCustomer@")
    assert step.idempotency_key == keys[0]


async def test_plain_functions_take_named_or_positional_arguments(bridge: Bridge) -> None:
    @bridge.tool
    def add(a: int, b: int = 1) -> int:
        return a + b

    @bridge.tool("multiply")
    async def times(a: int, b: int) -> int:
        return a * b

    assert sorted(bridge.tools) == ["add", "multiply"]
    assert await bridge.call_tool("add", {"a": 2}) == 3
    assert await bridge.call_tool("add", [2, 5]) == 7
    assert await bridge.call_tool("multiply", {"a": 3, "b": 4}) == 12
    assert await bridge.call_tool("add", {"a": 2, "b": None}) == 3  # null: the default


async def test_a_failed_call_raises_its_tool_error_and_fails_the_run(journal_path: Path) -> None:
    tools = {"getCustomer": tool.step(input=CustomerId, run=lambda args: CUSTOMERS[args.id])}
    async with Bridge(journal=journal_path, tools=tools) as bridge:
        with pytest.raises(ToolError) as invalid:
            await bridge.call_tool("getCustomer", {"id": 1}, run_id="bad-1")
        assert invalid.value.type == "ValidationError"
        assert "/id" in invalid.value.message
        with pytest.raises(ToolError) as replayed:
            await bridge.call_tool("getCustomer", {"id": 1}, run_id="bad-1")
        assert replayed.value.message == invalid.value.message
        with pytest.raises(ToolError) as unknown:
            await bridge.call_tool("getCustomr", {"id": "cus_1"})
        assert unknown.value.type == "ToolNotFound"
    run, _ = await journal_contents(journal_path, "bad-1")
    assert run is not None
    assert run.status == "failed"
    assert (run.error or "").startswith("ToolError: invalid arguments: /id: Input should be a valid string")


async def test_limits_apply_to_host_calls_too(bridge: Bridge) -> None:
    @bridge.tool
    def echo(text: str) -> str:
        return text

    with pytest.raises(ToolError) as too_large:
        await bridge.call_tool("echo", {"text": "x" * 200}, tool_options=ToolOptions(max_request_bytes=100))
    assert too_large.value.type == "RequestTooLarge"
    with pytest.raises(TypeError, match=r"a dict .* or a list"):
        await bridge.call_tool("echo", "hello")  # a str is a sequence, but not a list of arguments
    with pytest.raises(TypeError, match="JSON data"):
        await bridge.call_tool("echo", {"text": float("nan")})


async def test_a_tool_group_runs_its_steps_under_the_host_call(journal_path: Path) -> None:
    async def refund(args: dict[str, Any], ctx: ToolContext) -> str:
        charge = await ctx.step.run("find-charge", lambda: "ch_" + args["order"])
        return str(await ctx.step.run("refund-charge", lambda: "re_" + charge))

    async with Bridge(journal=journal_path, tools={"refund": tool.group(run=refund)}) as bridge:
        assert await bridge.call_tool("refund", {"order": "o1"}, run_id="group-1") == "re_ch_o1"
    _, steps = await journal_contents(journal_path, "group-1")
    call = next(s for s in steps if s.kind == "tool")
    assert [s.name for s in steps if s.parent_key == call.key] == ["find-charge", "refund-charge"]


async def test_a_closed_bridge_refuses_calls(journal_path: Path) -> None:
    bridge = Bridge(journal=journal_path, tools={"ping": lambda: "pong"})
    with pytest.raises(ToolbridgeError, match="not open"):
        await bridge.call_tool("ping")
