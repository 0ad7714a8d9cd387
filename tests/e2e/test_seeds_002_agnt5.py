"""Seed 002 (AGNT5 ``tool()`` / ``Tool``), written as its users write it, under both launchers.

``tool('lookup_order', {description, inputSchema}, handler)`` is ``tool.step(name=,
description=, input=, run=)`` (the handler takes ``(args, ctx)``); ``getSchema()`` is
``schema()``; ``agnt5 run lookup_order --type tool --input`` is ``toolbridge call``; an agent
in ``tools`` is a durable function running a model loop (``examples/docs/seed_apis_invoke.py``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from toolbridge import Bridge, RunWaiting, ToolContext, ToolOptions, request_approval, tool
from toolbridge.testing import tool_context

LAUNCHERS = ["process", pytest.param("bwrap", marks=pytest.mark.bwrap)]
TOOLBRIDGE = Path(sys.executable).with_name("toolbridge")
SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "docs" / "seed_apis_invoke.py"
WAIT = 60.0


@pytest.fixture(params=LAUNCHERS)
def sandbox(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def bridge(sandbox: str, journal_path: Path) -> AsyncIterator[Bridge]:
    async with Bridge(journal=journal_path, sandbox=sandbox) as opened:  # type: ignore[arg-type]
        yield opened


def lookup_order_handler(args: dict[str, str], ctx: ToolContext) -> dict[str, str]:
    return {"orderId": args["orderId"], "status": "shipped"}


lookup_order = tool.step(
    name="lookup_order",
    description="Look up an order by ID",
    input={"type": "object", "properties": {"orderId": {"type": "string"}}, "required": ["orderId"]},
    run=lookup_order_handler,
)

echo = tool.step(
    name="echo",
    description="Echo the text back",
    input={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    run=lambda args, ctx: f"echo: {args['text']}",
)


def test_get_schema_is_what_the_model_sees() -> None:
    assert lookup_order.schema() == {
        "name": "lookup_order",
        "description": "Look up an order by ID",
        "input_schema": {
            "type": "object",
            "properties": {"orderId": {"type": "string"}},
            "required": ["orderId"],
        },
        "requires_confirmation": False,
    }


async def test_call_it_yourself_and_invoke_a_tool_object() -> None:
    ctx = tool_context()
    assert await lookup_order.invoke(ctx, {"orderId": "A1"}) == {"orderId": "A1", "status": "shipped"}
    assert await echo.invoke(ctx, {"text": "hi"}) == "echo: hi"  # echo.invoke(ctx, { text: 'hi' })


async def test_run_it_on_its_own_from_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "worker.py").write_text(
        textwrap.dedent(
            f"""
            from toolbridge import Bridge, tool

            lookup_order = tool.step(
                name="lookup_order",
                description="Look up an order by ID",
                input={{"type": "object", "properties": {{"orderId": {{"type": "string"}}}}}},
                run=lambda args, ctx: {{"orderId": args["orderId"], "status": "shipped"}},
            )
            bridge = Bridge(journal={str(tmp_path / "worker.db")!r}, tools=[lookup_order])
            """
        )
    )
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE,
        "call",
        "worker:bridge",
        "lookup_order",
        "--input",
        '{"orderId": "A1"}',
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 0, err.decode()
    assert json.loads(out) == {"orderId": "A1", "status": "shipped"}


async def test_tools_given_to_sandboxed_code_and_a_person_in_the_loop(
    bridge: Bridge, journal_path: Path
) -> None:
    code = (
        'order = await tools.lookup_order(orderId="A1")\n'
        'said = await tools.echo(text=order["status"])\n'
        'decision = await tools.request_approval(action="refund order A1")\n'
        "return [order, said, decision['approved'], decision['by']]"
    )

    tools = [lookup_order, echo, request_approval()]
    hold = ToolOptions(approval_hold="100ms")  # the run pauses; entering it again resumes it
    with pytest.raises(RunWaiting) as waiting:
        async with bridge.run("agnt5-tools") as step:
            await step.sandbox.python("agent", code, tools=tools, tool_options=hold)
    (req,) = waiting.value.requests
    assert req.summary == "refund order A1"
    await bridge.approvals.approve(req.id, by="erin")  # a person answers (or the CLI, the web view)
    async with bridge.run("agnt5-tools") as step:
        result = await step.sandbox.python("agent", code, tools=tools, tool_options=hold)
    assert result == [{"orderId": "A1", "status": "shipped"}, "echo: shipped", True, "erin"]
    # The trace shows the wait once, across the pause and the resume, with how long it took.
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE, "trace", "agnt5-tools", "--journal", str(journal_path), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(process.communicate(), WAIT)
    waits = [line for line in out.decode().splitlines() if "for a person's decision" in line]
    assert len(waits) == 1, out.decode()
    assert "waited for a person's decision: approved  " in waits[0]
    assert not waits[0].endswith("…")


async def test_an_agent_in_tools_is_called_as_a_tool_named_after_it(sandbox: str, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("seed_apis_invoke", SAMPLE)
    assert spec is not None
    assert spec.loader is not None
    sample: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sample)
    await sample.main(tmp_path / "journal.db", sandbox=sandbox)  # asserts its own answer
    await sample.invoke_directly()
