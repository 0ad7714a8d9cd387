"""Strict JSON in, canonical JSON out.

Everything that crosses the sandbox boundary is JSON bytes. Python's ``json`` module accepts
``NaN``, ``Infinity`` and duplicate keys (the last one silently wins), and recurses without a
bound; none of that is acceptable from untrusted code, so every read goes through
:func:`loads_strict`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic_core import to_jsonable_python

MAX_DEPTH = 64
"""How deeply arrays and objects may nest in a value received from a sandbox."""


class JSONFormatError(ValueError):
    """Bytes that are not acceptable JSON; the message says why."""


def _reject_constant(name: str) -> Any:
    raise JSONFormatError(f"{name} is not valid JSON; send null or a string instead")


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise JSONFormatError(f"duplicate key {key!r} in a JSON object")
        result[key] = value
    return result


def _check_depth(value: Any, max_depth: int) -> None:
    # Iterative, so that hostile nesting cannot exhaust the interpreter's stack.
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            raise JSONFormatError(f"JSON nests deeper than {max_depth} levels")
        stack.extend((child, depth + 1) for child in children)


def loads_strict(data: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON, refusing NaN/Infinity, duplicate keys and nesting deeper than ``max_depth``.

    Raises:
        JSONFormatError: with a message that names the problem.
    """
    try:
        value = json.loads(
            data,
            parse_constant=_reject_constant,
            object_pairs_hook=_reject_duplicates,
        )
    except JSONFormatError:
        raise
    except RecursionError:
        raise JSONFormatError(f"JSON nests deeper than {max_depth} levels") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise JSONFormatError(f"not valid JSON: {exc}") from None
    _check_depth(value, max_depth)
    return value


def dumps(value: Any) -> str:
    """Serialize a tool's value: pydantic models, dataclasses, dates and the like included.

    Raises:
        ValueError: when the value holds NaN/Infinity.
        pydantic_core.PydanticSerializationError: when it cannot be represented as JSON.
    """
    return json.dumps(to_jsonable_python(value), ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def canonical(value: Any) -> str:
    """The one spelling of a JSON value: sorted keys, no spaces. Equal values, equal text."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":"))


def digest(text: str, length: int = 16) -> str:
    """A short stable hex digest, for step keys and idempotency keys."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]
