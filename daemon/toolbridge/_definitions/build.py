"""Tool definitions for model APIs: Anthropic, OpenAI (plain and strict) and MCP.

One place builds every definition: :func:`tool_definitions` for the host, and the
Definitions RPC (through :func:`definition`) for sandboxes and other processes.

Each definition is exactly what the provider's API accepts, nothing more: the APIs refuse
fields they do not know. Where a format cannot express part of a tool's schema, the
definition leaves it out and says so (:attr:`ToolDefinitions.dropped`, and a
:class:`DefinitionWarning`); the daemon still validates every call against the tool's own
schema, so a dropped constraint is enforced on the call, only not described to the model.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from toolbridge._definitions.openai_strict import NotStrictCompatibleError, to_openai_strict
from toolbridge._schema.walk import close_objects, inline_root_ref
from toolbridge._tools.convert import to_tools
from toolbridge._tools.tool import Tool

__all__ = [
    "FORMATS",
    "DefinitionFormat",
    "DefinitionWarning",
    "DroppedConstraint",
    "ToolDefinitions",
    "build_definition",
    "definition",
    "tool_definitions",
]

DefinitionFormat = Literal["anthropic", "openai", "openai-strict", "mcp"]
FORMATS: tuple[DefinitionFormat, ...] = ("anthropic", "openai", "openai-strict", "mcp")

ANY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}
"""The input schema of a tool declared without one: it takes any object."""

MCP_CONFIRMATION_KEY = "toolbridge/requires_confirmation"
"""The ``_meta`` key that marks a ``requires_confirmation`` tool in MCP definitions."""

# Keywords Anthropic's and OpenAI's APIs refuse at the root of an input schema.
_ROOT_REFUSED = ("anyOf", "oneOf", "allOf", "not", "enum")
_PROVIDERS = {"anthropic": "Anthropic", "openai": "OpenAI", "openai-strict": "OpenAI"}
_MAX_WARNED = 5


class DefinitionWarning(UserWarning):
    """:func:`tool_definitions` left out constraints the chosen format cannot express.

    The daemon still enforces them on every call. ``ToolDefinitions.dropped`` lists them;
    silence this warning with the :mod:`warnings` filters once you have read it.
    """


@dataclass(frozen=True)
class DroppedConstraint:
    """Part of a tool's schema that a definition format could not carry.

    Attributes:
        tool: The tool's name.
        pointer: A JSON pointer to the dropped part: into the input schema as the other
            formats show it, or starting with ``/outputSchema`` for an MCP output schema.
        reason: What was dropped, and why.
    """

    tool: str
    pointer: str
    reason: str

    def __str__(self) -> str:
        return f"{self.tool}: {self.pointer or '/'}: {self.reason}"


@dataclass(frozen=True)
class BuiltDefinition:
    """One tool's definition in one format, and what the format could not carry."""

    definition: dict[str, Any]
    dropped: tuple[DroppedConstraint, ...]


class ToolDefinitions(list[dict[str, Any]]):
    """The definitions of some tools in one format: a plain list, ready for the model API.

    Attributes:
        format: The format the definitions are in.
        dropped: What the format could not express, tool by tool (empty when nothing).
    """

    def __init__(
        self,
        definitions: Iterable[dict[str, Any]],
        *,
        format: DefinitionFormat,
        dropped: Iterable[DroppedConstraint] = (),
    ) -> None:
        super().__init__(definitions)
        self.format: DefinitionFormat = format
        self.dropped: tuple[DroppedConstraint, ...] = tuple(dropped)


def check_format(format: object) -> DefinitionFormat:
    """Return ``format`` if it names a definition format.

    Raises:
        ValueError: naming the formats there are.
    """
    for known in FORMATS:
        if format == known:
            return known
    raise ValueError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")


def model_input_schema(name: str, tool: Tool) -> dict[str, Any]:
    """The input schema as a model should see it: an object, closed where the daemon closes it.

    Raises:
        ValueError: when the tool's input is not an object (model APIs pass an object).
    """
    if tool.input_schema is None:
        return dict(ANY_OBJECT)
    schema = inline_root_ref(tool.input_schema.json_schema)
    if schema.get("type") != "object":
        raise ValueError(
            f"tool {name!r} takes {_describe(schema)}, but model APIs pass a tool's arguments "
            "as an object: declare input= as a pydantic model or an object JSON Schema"
        )
    if tool.strict:
        return close_objects(schema)
    if tool.signature is not None and "additionalProperties" not in schema:
        # A function's parameters are all it takes: the signature refuses other names.
        return {**schema, "additionalProperties": False}
    return schema


def _describe(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if kind is not None:
        return f"a value of type {kind!r}"
    keywords = [key for key in _ROOT_REFUSED if key in schema]
    return f"a schema with {keywords[0]} at its root" if keywords else "a value of any type"


def _drop_root_keywords(
    name: str, schema: dict[str, Any], format: DefinitionFormat
) -> tuple[dict[str, Any], list[DroppedConstraint]]:
    refused = [key for key in _ROOT_REFUSED if key in schema]
    if not refused:
        return schema, []
    provider = _PROVIDERS[format]
    dropped = [
        DroppedConstraint(
            name, f"/{key}", f"{key} at the root of an input schema is refused by the {provider} API"
        )
        for key in refused
    ]
    return {key: value for key, value in schema.items() if key not in refused}, dropped


def build_definition(name: str, tool: Tool, format: DefinitionFormat = "anthropic") -> BuiltDefinition:
    """One tool's definition in ``format``, with what the format could not carry.

    The definition is a copy: changing it (adding ``cache_control``, say) leaves the tool's
    own schema, which validates its calls, as it was.

    Raises:
        ValueError: for an unknown format, or a tool whose input is not an object.
    """
    built = _build(name, tool, check_format(format))
    return BuiltDefinition(copy.deepcopy(built.definition), built.dropped)


def _build(name: str, tool: Tool, format: DefinitionFormat) -> BuiltDefinition:
    schema = model_input_schema(name, tool)
    if format == "mcp":
        return _mcp(name, tool, schema)
    schema, dropped = _drop_root_keywords(name, schema, format)
    description = tool.description
    if format == "anthropic":
        return BuiltDefinition(
            {"name": name, "description": description, "input_schema": schema}, tuple(dropped)
        )
    strict = format == "openai-strict"
    if strict:
        try:
            schema, drops = to_openai_strict(schema)
            dropped += [DroppedConstraint(name, pointer, reason) for pointer, reason in drops]
        except NotStrictCompatibleError as exc:
            dropped.append(
                DroppedConstraint(name, exc.pointer, f"{exc.reason}, so this tool is sent with strict: false")
            )
            strict = False
    openai = {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": schema,
        "strict": strict,
    }
    return BuiltDefinition(openai, tuple(dropped))


def _mcp(name: str, tool: Tool, schema: dict[str, Any]) -> BuiltDefinition:
    result: dict[str, Any] = {"name": name, "description": tool.description, "inputSchema": schema}
    dropped: list[DroppedConstraint] = []
    if tool.output_schema is not None:
        output = inline_root_ref(tool.output_schema.json_schema)
        if output.get("type") == "object":
            result["outputSchema"] = output
        else:
            dropped.append(
                DroppedConstraint(
                    name,
                    "/outputSchema",
                    f"the output is {_describe(output)}, and MCP (2025-11-25) takes only object "
                    "output schemas, so outputSchema is left out",
                )
            )
    if tool.requires_confirmation is not False:
        # MCP's annotations have no hint for it; _meta is where a protocol extension goes.
        result["_meta"] = {MCP_CONFIRMATION_KEY: True}
    return BuiltDefinition(result, tuple(dropped))


def definition(name: str, tool: Tool, format: DefinitionFormat = "anthropic") -> dict[str, Any]:
    """One tool's definition in ``format`` (what the Definitions RPC serves).

    Raises:
        ValueError: for an unknown format, or a tool whose input is not an object.
    """
    return build_definition(name, tool, format).definition


def tool_definitions(
    tools: Mapping[str, object] | Sequence[object], format: DefinitionFormat = "anthropic"
) -> ToolDefinitions:
    """Definitions of ``tools`` for a model API, ordered by name.

    Each definition is what the provider accepts, ready to pass as the request's ``tools``:

    - ``"anthropic"``: ``{name, description, input_schema}`` (Messages API);
    - ``"openai"``: ``{type: "function", name, description, parameters, strict: false}``
      (Responses API; for Chat Completions, nest all but ``type`` under ``function``);
    - ``"openai-strict"``: the same with ``strict: true`` and the schema rewritten for
      strict mode: objects closed, every property required, optional ones nullable (a
      ``null`` argument then means "not given"). A tool strict mode cannot express is sent
      with ``strict: false``;
    - ``"mcp"``: ``{name, description, inputSchema, outputSchema}`` (Model Context Protocol).

    A tool without an input schema takes any object. Descriptions are as written. A
    ``requires_confirmation`` tool says so in MCP's ``_meta``; the other formats have no field
    for it (toolbridge enforces it on every call, whatever the model was told).

    Args:
        tools: Name -> tool, as given to ``commands.run``.
        format: One of ``"anthropic"``, ``"openai"``, ``"openai-strict"``, ``"mcp"``.

    Returns:
        A list of definitions; its ``dropped`` attribute lists what the format could not
        express. When that is not empty, a :class:`DefinitionWarning` says so too.

    Raises:
        ValueError: for an unknown format, an invalid tool name, or a tool whose input is
            not an object.
        TypeError: for a value that is not a tool.
    """
    format = check_format(format)
    built = [build_definition(name, tool, format) for name, tool in sorted(to_tools(tools).items())]
    result = ToolDefinitions(
        (b.definition for b in built), format=format, dropped=(d for b in built for d in b.dropped)
    )
    if result.dropped:
        shown = "; ".join(str(d) for d in result.dropped[:_MAX_WARNED])
        more = len(result.dropped) - _MAX_WARNED
        warnings.warn(
            DefinitionWarning(
                f"the {format} definitions leave out {len(result.dropped)} constraint(s) the format "
                f"cannot express; the daemon still enforces them on every call: {shown}"
                + (f" (and {more} more; see .dropped)" if more > 0 else "")
            ),
            stacklevel=2,
        )
    return result
