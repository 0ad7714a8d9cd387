"""A call's arguments checked against its tool's schema: a :class:`BoundCall`, ready to run.

Where a tool's declared input meets the arguments a sandbox (or ``on_start``) sends: a plain
function's are bound to its signature, a ``tool.step``'s validated against ``input``, from the
bytes received when they are the whole input. What a schema says of nulls and secrets is read
here too, once per tool.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolbridge._json import canonical
from toolbridge._schema.nulls import NullOmission
from toolbridge._schema.schema import Schema, SchemaValidationError

if TYPE_CHECKING:
    from toolbridge._tools.definition import Tool

__all__ = ["BoundCall", "bind", "marks_secrets", "null_omission", "rebind"]


@dataclass(frozen=True)
class BoundCall:
    """Validated arguments, ready for the tool's handler."""

    args: list[Any]
    kwargs: dict[str, Any]
    make_input: Callable[[], Any] = field(repr=False)

    @functools.cached_property
    def input(self) -> Any:
        """The arguments as plain JSON data, for hooks; built only when one asks."""
        return self.make_input()


def bind(
    tool: Tool, nulls: NullOmission | None, positional: list[Any], named: dict[str, Any], named_json: bytes
) -> BoundCall:
    """``tool``'s arguments from the sandbox, validated (see ``Tool.bind``).

    Args:
        tool: The tool called.
        nulls: Where a null means "not given" in its input (:func:`null_omission`).
        positional: The positional arguments.
        named: The named arguments.
        named_json: The named arguments as the bytes received (``b""`` when not at hand).

    Raises:
        SchemaValidationError: naming each offending field.
    """
    if tool.kind == "function":
        if tool.signature is None:
            return BoundCall(positional, named, lambda: {"args": positional, "kwargs": named})
        given = {"args": positional, "kwargs": named} if named else positional
        if named and nulls is not None:
            named = nulls.apply(named)
        args, kwargs = tool.signature.bind(positional, named)
        return BoundCall(args, kwargs, lambda: given)
    if positional and named:
        raise SchemaValidationError([("", "pass named arguments or one object, not both")])
    if len(positional) > 1:
        raise SchemaValidationError(
            [
                (
                    "",
                    "this tool takes named arguments (or one object), "
                    f"got {len(positional)} positional arguments",
                )
            ]
        )
    raw: Any = positional[0] if positional else named
    if tool.input_schema is None:
        return BoundCall([raw], {}, lambda: raw)
    given = raw
    if nulls is not None and (not named_json or b"null" in named_json):
        given = nulls.apply(raw)
    # Validated from the bytes received when they are the whole input, as they usually are.
    text = named_json if named and named_json and given is raw else canonical(given)
    schema = tool.input_schema
    value = schema.validate_json(text, strict=tool.strict)
    return BoundCall([value], {}, lambda: schema.to_jsonable(value))


def rebind(tool: Tool, nulls: NullOmission | None, changed_input: Any) -> BoundCall:
    """An input rewritten by ``on_start``, validated (see ``Tool.rebind``)."""
    if tool.kind == "function":
        args = changed_input if isinstance(changed_input, list) else [changed_input]
        return bind(tool, nulls, list(args), {}, b"")
    schema = tool.input_schema
    if schema is None:
        return BoundCall([changed_input], {}, lambda: changed_input)
    value = schema.validate_python(changed_input, strict=False)
    return BoundCall([value], {}, lambda: schema.to_jsonable(value))


def null_omission(schema: Schema | None) -> NullOmission | None:
    """Where a call may hold a null meaning "not given" (see :mod:`_nulls`); None if nowhere."""
    if schema is None:
        return None
    omission = NullOmission(schema.json_schema)
    return omission if omission.needed else None


def marks_secrets(schema: Schema | None) -> bool:
    """A quick look for ``writeOnly: true`` or ``format: "password"`` anywhere in a schema."""
    if schema is None:
        return False
    text = json.dumps(schema.json_schema)
    return '"writeOnly": true' in text or '"format": "password"' in text
