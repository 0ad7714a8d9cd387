"""Strict JSON in, canonical JSON out.

Everything that crosses the sandbox boundary is JSON bytes. Python's ``json`` module accepts
``NaN``, ``Infinity`` and duplicate keys (the last one silently wins), turns ``1e999`` into
infinity, parses ``"\ud800"`` into a string that cannot be encoded again, raises a bare
``ValueError`` on an integer of more than 4,300 digits, and recurses without a bound; none of
that is acceptable from untrusted code, so every read goes through :func:`loads_strict`, and
each refusal is a :class:`JSONFormatError` whose message names the problem.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from pydantic_core import to_jsonable_python

MAX_DEPTH = 64
"""How deeply arrays and objects may nest in a value received from a sandbox."""

MAX_INTEGER_DIGITS = 4300
"""The longest integer accepted, in digits: Python's own limit for turning text into an int
(and back, as the journal must), so that a value we accept can always be written again."""


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


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INTEGER_DIGITS:
        raise JSONFormatError(
            f"an integer of {digits} digits is too long; at most {MAX_INTEGER_DIGITS} digits "
            "are accepted (send a larger number as a string)"
        )
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise JSONFormatError(f"the number {shown} is out of range for a 64-bit float; send it as a string")
    return value


def _check_text(text: str) -> None:
    if text.isascii():
        return
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        raise JSONFormatError(
            f"a JSON string holds a lone surrogate \\u{code:04x}, which is not valid Unicode; "
            "send well-formed text"
        ) from None


def _check_tree(value: Any, max_depth: int) -> None:
    # Iterative, so that hostile nesting cannot exhaust the interpreter's stack.
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item)
            continue
        if isinstance(item, dict):
            for key in item:
                _check_text(key)
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            raise JSONFormatError(f"JSON nests deeper than {max_depth} levels")
        stack.extend((child, depth + 1) for child in children)


def loads_strict(data: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON, refusing what cannot be carried faithfully.

    Refused: NaN/Infinity, numbers out of a float's range (``1e999``), integers longer than
    :data:`MAX_INTEGER_DIGITS`, lone surrogates (``"\\ud800"``), duplicate keys, and nesting
    deeper than ``max_depth``.

    Raises:
        JSONFormatError: with a message that names the problem.
    """
    try:
        value = _STRICT.decode(data.decode() if isinstance(data, bytes) else data)
    except JSONFormatError:
        raise
    except RecursionError:
        raise JSONFormatError(f"JSON nests deeper than {max_depth} levels") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise JSONFormatError(f"not valid JSON: {exc}") from None
    _check_tree(value, max_depth)
    return value


# One decoder and two encoders for every call: json.loads/json.dumps with options build one
# per call, which the hot path pays for three times.
_STRICT = json.JSONDecoder(
    parse_constant=_reject_constant,
    parse_int=_parse_int,
    parse_float=_parse_float,
    object_pairs_hook=_reject_duplicates,
)
_COMPACT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_CANONICAL = json.JSONEncoder(ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":"))


def dumps(value: Any) -> str:
    """Serialize a tool's value: pydantic models, dataclasses, dates and the like included.

    Raises:
        ValueError: when the value holds NaN/Infinity.
        pydantic_core.PydanticSerializationError: when it cannot be represented as JSON.
    """
    return _COMPACT.encode(to_jsonable_python(value))


def canonical(value: Any) -> str:
    """The one spelling of a JSON value: sorted keys, no spaces. Equal values, equal text."""
    return _CANONICAL.encode(value)


def digest(text: str, length: int = 16) -> str:
    """A short stable hex digest, for step keys and idempotency keys."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]
