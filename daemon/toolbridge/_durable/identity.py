"""What identifies a step, and the check that a replay asks for the step that was recorded.

A step is found on replay by its key alone. If the run's code changed meanwhile (another
command line, other tools, other snippet code, another function for ``step.run``), the
recorded result belongs to a step nobody asks for any more: returning it silently would be
wrong. So each step records what identifies it, and a replay that asks for something else
under the same key raises :class:`ReplayMismatchError` naming the step and what changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from toolbridge._errors import ReplayMismatchError
from toolbridge._json import canonical
from toolbridge._records import StepRecord

__all__ = ["expect_kind", "expect_step", "function_name"]

ACCEPT_HINT = (
    "the run's code changed since this step was recorded: to run the changed step, give it a "
    "new step id (or use a new run id); to keep the recorded result, ask for the step as it was"
)


def function_name(fn: Callable[..., Any]) -> str:
    """How a ``step.run`` function is recorded: its module and qualified name."""
    name = getattr(fn, "__qualname__", None) or getattr(type(fn), "__qualname__", repr(fn))
    module = getattr(fn, "__module__", None)
    return f"{module}.{name}" if module else str(name)


def expect_kind(rec: StepRecord, kind: str) -> StepRecord:
    """Raise when replay finds another kind of step under the same key."""
    if rec.kind != kind:
        raise ReplayMismatchError(
            f"step {rec.key!r} was recorded as a {rec.kind} step but is now asked for as a "
            f"{kind} step: the run's code changed; use a new run id"
        )
    return rec


def expect_step(rec: StepRecord, kind: str, identity: Mapping[str, Any] | None = None) -> StepRecord:
    """Raise when replay finds another step under the same key: another kind, or another identity.

    Only what the record holds is compared, so steps recorded before a field was recorded
    replay as they did.
    """
    expect_kind(rec, kind)
    if not identity:
        return rec
    try:
        recorded = json.loads(rec.input_json or "null")
    except ValueError:
        return rec
    if not isinstance(recorded, dict):
        return rec
    current = json.loads(canonical(dict(identity)))  # as it would be recorded (lists, not tuples)
    changed = [
        f"{name} was {recorded[name]!r}, now {value!r}"
        for name, value in current.items()
        if name in recorded and recorded[name] != value
    ]
    if changed:
        what = "; ".join(changed)
        raise ReplayMismatchError(f"step {rec.key!r} ({rec.kind}) changed: {what}; {ACCEPT_HINT}")
    return rec
