"""What identifies a step, and the check that a replay asks for the step that was recorded.

A step is found on replay by its key alone. If the run's code changed meanwhile (another
command line, other tools, other snippet code, another function for ``step.run``) or its
inputs did (``step.run``'s arguments, a command's ``env=``), the recorded result belongs to
a step nobody asks for any more: returning it silently would be wrong. So each step records
what identifies it, and a replay that asks for something else under the same key raises
:class:`ReplayMismatchError` naming the step and what changed.

A function's *code* is not part of its identity, only its name: a fix deployed between a
crash and the replay must still replay. Secrets (``SecretStr``, a command's ``env=``
values) are recorded as keyed hashes (see ``_secrets``), so the journal never holds them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

import pydantic
import pydantic_core

from toolbridge._errors import ReplayMismatchError
from toolbridge._json import canonical
from toolbridge._records import StepRecord
from toolbridge._secrets import DIGEST_PREFIX, SecretBox

__all__ = ["arguments_identity", "env_identity", "expect_kind", "expect_step", "function_name"]

SHOWN = 120
"""Characters of a changed value a mismatch shows, at most."""

ACCEPT_HINT = (
    "the run's code changed since this step was recorded: to run the changed step, give it a "
    "new step id (or use a new run id); to keep the recorded result, ask for the step as it was"
)


def function_name(fn: Callable[..., Any]) -> str:
    """How a ``step.run`` function is recorded: its module and qualified name."""
    name = getattr(fn, "__qualname__", None) or getattr(type(fn), "__qualname__", repr(fn))
    module = getattr(fn, "__module__", None)
    return f"{module}.{name}" if module else str(name)


def identity_value(value: Any, box: SecretBox) -> Any:
    """``value`` as JSON data for a step's identity, each secret in it as a keyed hash."""
    if isinstance(value, pydantic.SecretStr | pydantic.SecretBytes):
        return {"secret": box.digest(value.get_secret_value())}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): identity_value(v, box) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [identity_value(v, box) for v in value]
    if isinstance(value, pydantic.BaseModel):
        return identity_value(value.model_dump(mode="python"), box)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return identity_value({f.name: getattr(value, f.name) for f in dataclasses.fields(value)}, box)
    try:
        return pydantic_core.to_jsonable_python(value)
    except pydantic_core.PydanticSerializationError:
        # Nothing stable to compare (its repr may hold an address): only its type counts.
        return {"unrepresentable": f"{type(value).__module__}.{type(value).__qualname__}"}


def arguments_identity(args: tuple[Any, ...], kwargs: Mapping[str, Any], box: SecretBox) -> dict[str, Any]:
    """The arguments of a ``step.run`` as its identity records them."""
    return {"args": identity_value(args, box), "kwargs": identity_value(dict(kwargs), box)}


def env_identity(env: Mapping[str, str] | None, box: SecretBox) -> dict[str, str]:
    """A command's ``env=`` as its identity records it: names in clear, values as keyed hashes."""
    return {name: box.digest(str(value)) for name, value in sorted((env or {}).items())}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."


def _change(name: str, was: Any, now: Any) -> str:
    if isinstance(was, dict) and isinstance(now, dict) and name == "env":
        # Values are keyed hashes: name the variables, never show what they hold.
        names = sorted(k for k in {*was, *now} if was.get(k) != now.get(k))
        return f"env changed in {', '.join(names)}"
    if DIGEST_PREFIX in json.dumps(was) or DIGEST_PREFIX in json.dumps(now):
        return f"{name} changed (a secret in it differs, or what is around it)"
    return f"{name} was {_shown(was)}, now {_shown(now)}"


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
        _change(name, recorded[name], value)
        for name, value in current.items()
        if name in recorded and recorded[name] != value
    ]
    if changed:
        what = "; ".join(changed)
        raise ReplayMismatchError(f"step {rec.key!r} ({rec.kind}) changed: {what}; {ACCEPT_HINT}")
    return rec
