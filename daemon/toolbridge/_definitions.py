"""Tool definitions for model APIs: Anthropic, OpenAI (plain and strict) and MCP."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from toolbridge._tool import Tool, to_tools

DefinitionFormat = Literal["anthropic", "openai", "openai-strict", "mcp"]
FORMATS: tuple[DefinitionFormat, ...] = ("anthropic", "openai", "openai-strict", "mcp")

_ANY_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}


def _input_schema(definition: Tool) -> dict[str, Any]:
    if definition.input_schema is None:
        return dict(_ANY_OBJECT)
    return dict(definition.input_schema.json_schema)


def definition(name: str, tool: Tool, format: DefinitionFormat = "anthropic") -> dict[str, Any]:
    """One tool's definition in ``format``."""
    schema = _input_schema(tool)
    if format == "anthropic":
        return {"name": name, "description": tool.description, "input_schema": schema}
    if format in ("openai", "openai-strict"):
        result: dict[str, Any] = {
            "type": "function",
            "name": name,
            "description": tool.description,
            "parameters": schema,
        }
        if format == "openai-strict":
            result["strict"] = True
        return result
    if format == "mcp":
        result = {"name": name, "description": tool.description, "inputSchema": schema}
        if tool.output_schema is not None:
            result["outputSchema"] = tool.output_schema.json_schema
        return result
    raise ValueError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")


def tool_definitions(
    tools: Mapping[str, object], format: DefinitionFormat = "anthropic"
) -> list[dict[str, Any]]:
    """Definitions of ``tools`` for a model API, ordered by name.

    Args:
        tools: Name -> tool, as given to ``commands.run``.
        format: ``"anthropic"`` (``{name, description, input_schema}``), ``"openai"``
            (``{type: "function", name, description, parameters}``), ``"openai-strict"``
            or ``"mcp"`` (``{name, description, inputSchema, outputSchema}``).

    Raises:
        ValueError: for an unknown format or an invalid tool name.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
    return [definition(name, tool, format) for name, tool in sorted(to_tools(tools).items())]
