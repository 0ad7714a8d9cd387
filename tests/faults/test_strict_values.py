"""Item 14: snippet values are validated strictly; ``strict=False`` means one thing for both schemas."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from toolbridge import Bridge, SnippetError, tool


@pytest.mark.parametrize(
    ("code", "refused"), [('return "12"', True), ("return 12.0", True), ("return 12", False)]
)
async def test_a_python_snippets_int_output_refuses_a_string_and_a_float(
    any_bridge: Bridge, code: str, refused: bool
) -> None:
    async with any_bridge.run() as step:
        if refused:
            with pytest.raises(SnippetError, match="does not match output"):
                await step.sandbox.python("value", code, output=int)
        else:
            assert await step.sandbox.python("value", code, output=int) == 12


async def test_a_typescript_snippets_int_output_refuses_a_string(any_bridge: Bridge) -> None:
    async with any_bridge.run("ts-strict") as step:
        with pytest.raises(SnippetError, match="does not match output"):
            await step.sandbox.typescript("value", 'return "12";', output=int)
        assert await step.sandbox.typescript("good", "return 12;", output=int) == 12
    async with any_bridge.run("ts-strict") as step:  # a replay refuses the same value again
        with pytest.raises(SnippetError, match="does not match output"):
            await step.sandbox.typescript("value", 'return "12";', output=int)


class Line(BaseModel):
    sku: str
    quantity: int
    gift: bool = False


LINE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer"}, "gift": {"type": "boolean"}},
    "required": ["sku", "quantity"],
}

AGENT = """
import asyncio, json
from inngest_tools import tools, ToolError

async def main():
    out = {}
    for name in ("modelLine", "schemaLine"):
        for label, args in (("coerced", {"sku": "a", "quantity": "2", "gift": "true", "note": "x"}),
                            ("refused", {"sku": 7, "quantity": "two"})):
            try:
                out[f"{name}/{label}"] = await getattr(tools, name)(**args)
            except ToolError as exc:
                out[f"{name}/{label}"] = exc.type
    print(json.dumps(out))

asyncio.run(main())
"""


async def test_lax_json_schema_and_lax_pydantic_inputs_coerce_the_same(
    any_bridge: Bridge, write_script: Callable[[str, str], Path], work_dir: Path
) -> None:
    write_script("agent.py", AGENT)

    def model_line(args: Line) -> dict[str, Any]:
        return {**args.model_dump(), **(args.model_extra or {})}

    tools = {
        "modelLine": tool.step(input=Line, strict=False, run=model_line),
        "schemaLine": tool.step(input=LINE_SCHEMA, strict=False, run=lambda args: args),
    }
    async with any_bridge.run() as step:
        result = await step.sandbox.commands.run("agent", "python3 agent.py", tools=tools, cwd=work_dir)
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    coerced = {"sku": "a", "quantity": 2, "gift": True, "note": "x"}
    assert out == {
        "modelLine/coerced": coerced,
        "schemaLine/coerced": coerced,
        "modelLine/refused": "ValidationError",  # a number never becomes a string
        "schemaLine/refused": "ValidationError",
    }
