"""Lax coercion for JSON Schema dicts, the same coercions pydantic's lax mode makes.

``strict=False`` means one thing whatever the schema is declared as: a value of the wrong
JSON type that pydantic's lax mode would coerce (``"2"`` for an integer, ``2.0`` for an
integer, ``"2.5"`` for a number, ``"true"`` for a boolean) is coerced for a JSON Schema dict
too. Nothing else is: numbers never become strings, as in pydantic.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterable
from typing import Any

import jsonschema

__all__ = ["coerce_lax"]

MAX_ROUNDS = 8
"""Passes of coercion over one value (a coerced field can reveal another problem beneath it)."""

_INTEGER = re.compile(r"\s*[+-]?\d+\s*")
_TRUE = {"1", "on", "t", "true", "y", "yes"}
_FALSE = {"0", "off", "f", "false", "n", "no"}
_MISSING = object()


def _coerce(value: Any, types: Iterable[str]) -> Any:
    """``value`` as the first of ``types`` pydantic's lax mode would coerce it to, or _MISSING."""
    for wanted in types:
        if wanted == "integer":
            if isinstance(value, str) and _INTEGER.fullmatch(value):
                return int(value)
            if isinstance(value, float) and value.is_integer():
                return int(value)
        elif wanted == "number" and isinstance(value, str) and not isinstance(value, bool):
            try:
                number = float(value)
            except ValueError:
                continue
            if math.isfinite(number):
                return int(number) if _INTEGER.fullmatch(value) else number
        elif wanted == "boolean":
            if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
                return value.strip().lower() in _TRUE
            if type(value) is int and value in (0, 1):
                return bool(value)
    return _MISSING


def coerce_lax(validator: jsonschema.protocols.Validator, value: Any) -> Any:
    """``value`` with every coercible type mismatch coerced; the input is never changed."""
    for _ in range(MAX_ROUNDS):
        changes = []
        for error in validator.iter_errors(value):
            if error.validator != "type":
                continue
            wanted: Any = error.validator_value
            coerced = _coerce(error.instance, [wanted] if isinstance(wanted, str) else wanted)
            if coerced is not _MISSING:
                changes.append((list(error.absolute_path), coerced))
        if not changes:
            return value
        value = copy.deepcopy(value)
        for path, coerced in changes:
            if not path:
                value = coerced
                continue
            holder = value
            for part in path[:-1]:
                holder = holder[part]
            holder[path[-1]] = coerced
    return value
