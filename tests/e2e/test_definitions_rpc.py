"""Definitions over gRPC: what a sandboxed model loop gets from ``await definitions(...)`` is
what the host gets from ``tool_definitions``, in every format."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path

from tests.definitions_catalog import catalog
from toolbridge import Bridge, DefinitionWarning, tool, tool_definitions
from toolbridge._definitions.build import FORMATS

LOOP = """
import asyncio, json
from inngest_tools import ToolError, definitions

async def main():
    out = {fmt: await definitions(format=fmt) for fmt in ("anthropic", "openai", "openai-strict", "mcp")}
    out["default"] = await definitions()
    try:
        await definitions(format="gemini")
    except ValueError as error:
        out["unknown"] = str(error)
    print(json.dumps(out))

asyncio.run(main())
"""


async def test_a_sandbox_gets_the_host_definitions_in_every_format(
    bridge: Bridge, script: Callable[[str, str], Path], tmp_path: Path
) -> None:
    script("loop.py", LOOP)
    tools = catalog()
    async with bridge.run("definitions-1") as step:
        result = await step.sandbox.commands.run("loop", "python loop.py", tools=tools, cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DefinitionWarning)
        for format in FORMATS:
            assert out[format] == json.loads(json.dumps(tool_definitions(tools, format=format))), format
    assert out["default"] == out["anthropic"]
    assert "unknown format 'gemini'" in out["unknown"]


async def test_a_snippet_sees_only_its_own_tools(bridge: Bridge) -> None:
    tools = {"ping": tool.step(description="Check that the service answers", run=lambda args: "pong")}
    async with bridge.run("definitions-2") as step:
        names = await step.sandbox.python(
            "names", "return [d['name'] for d in await definitions(format='openai')]", tools=tools
        )
    assert names == ["ping"]


async def test_a_tool_that_cannot_have_a_definition_fails_the_request_with_its_name(bridge: Bridge) -> None:
    tools = {"count": tool.step(input=int, run=lambda n: n)}
    code = """
try:
    await definitions()
except ToolError as error:
    return [error.type, error.message]
"""
    async with bridge.run("definitions-3") as step:
        answer = await step.sandbox.python("bad", code, tools=tools)
    assert answer[0] == "ProtocolError"
    assert "tool 'count' takes a value of type 'integer'" in answer[1]
