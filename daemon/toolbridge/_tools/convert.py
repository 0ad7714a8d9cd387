"""Anything accepted as a tool (a function, ``tool.step(...)``, a durable function) as a :class:`Tool`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from toolbridge._schema.signature import describe, read_signature
from toolbridge._tools.tool import Tool, check_tool_name

__all__ = ["to_tool", "to_tools"]


def to_tool(value: object) -> Tool:
    """The :class:`Tool` for anything accepted as a tool.

    Raises:
        TypeError: for values that are not tools, naming what is accepted.
    """
    if isinstance(value, Tool):
        return value
    as_tool = getattr(value, "__toolbridge_tool__", None)
    if as_tool is not None:
        result = as_tool()
        if isinstance(result, Tool):
            return result
    if callable(value):
        description, _ = describe(value)
        signature = read_signature(value)
        return Tool(
            kind="function",
            handler=value,
            description=description,
            signature=signature,
            input_schema=None if signature is None else signature.schema,
            strict=False,
        )
    raise TypeError(
        f"{value!r} is not a tool: pass a function, tool.step(...), tool.group(...) or a durable function"
    )


def to_tools(tools: Mapping[str, object] | Sequence[object]) -> dict[str, Tool]:
    """Check names and convert ``tools=``: a dict of name -> tool, or a list of named tools.

    Raises:
        ValueError: for an invalid or repeated name.
        TypeError: for a value that is not a tool, or a tool in a list without a name.
    """
    if isinstance(tools, Mapping):
        return {check_tool_name(name): to_tool(value) for name, value in tools.items()}
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        raise TypeError("tools= must be a dict of name -> tool, or a list of named tools")
    named: dict[str, Tool] = {}
    for value in tools:
        item = to_tool(value)
        if item.name is None:
            raise TypeError(f"{value!r} has no name: declare it with tool.step(name=...), or pass a dict")
        if item.name in named:
            raise ValueError(f"two tools in tools= are named {item.name!r}")
        named[item.name] = item
    return named
