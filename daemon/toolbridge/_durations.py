"""Time options as people write them: seconds as a number, or ``"250ms"``, ``"10s"``, ``"5m"``, ``"1h30m"``.

The seeds write durations as strings (``toolTimeout: "10s"``); the Python API has always taken
seconds. Every time option goes through :func:`seconds`, so both work everywhere, and a bad
one fails when it is given, with the option's name and the forms allowed.
"""

from __future__ import annotations

import math
import re

__all__ = ["FORMS", "Duration", "optional_seconds", "seconds"]

Duration = float | int | str
"""What a time option accepts: seconds as a number, or a string such as ``"1h30m"``."""

FORMS = 'seconds as a number (2.5), or a string of units largest first: "250ms", "10s", "5m", "1h30m", "1d"'

_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_ORDER = ["d", "h", "m", "s", "ms"]
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|d|h|m|s)")


def seconds(value: object, *, option: str, allow_zero: bool = False) -> float:
    """The number of seconds ``value`` stands for.

    Args:
        value: A number of seconds, or a string of one or more ``<number><unit>`` parts
            (units ``d``, ``h``, ``m``, ``s``, ``ms``, each at most once, largest first).
        option: The option's name, for the error message (``"ToolOptions.tool_timeout"``).
        allow_zero: Whether zero is allowed (it is not by default: a limit of nothing).

    Raises:
        ValueError: naming ``option`` and the forms allowed, for anything else (negative,
            not finite, an unknown unit, a boolean).
    """
    if isinstance(value, bool):
        raise _bad(option, value)
    if isinstance(value, (int, float)):
        result = float(value)
    elif isinstance(value, str):
        result = _parse(value.strip(), option, value)
    else:
        raise _bad(option, value)
    if not math.isfinite(result) or result < 0 or (result == 0 and not allow_zero):
        raise _bad(
            option, value, "must be a duration above zero" if result == 0 else "must be a positive duration"
        )
    return result


def optional_seconds(value: object, *, option: str, allow_zero: bool = False) -> float | None:
    """:func:`seconds`, with ``None`` passed through (an option left unset)."""
    return None if value is None else seconds(value, option=option, allow_zero=allow_zero)


def _parse(text: str, option: str, value: object) -> float:
    position = 0
    total = 0.0
    last = -1
    for match in _PART.finditer(text):
        unit = match.group(2)
        rank = _ORDER.index(unit)
        if match.start() != position or rank <= last:
            raise _bad(option, value)
        last = rank
        total += float(match.group(1)) * _UNITS[unit]
        position = match.end()
    if position == 0 or position != len(text):
        raise _bad(option, value)
    return total


def _bad(option: str, value: object, why: str = "is not a duration") -> ValueError:
    return ValueError(f"{option}={value!r} {why}: give {FORMS}")
