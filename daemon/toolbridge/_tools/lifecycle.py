"""``lifecycle={"on_start": ..., "on_finish": ..., "on_error": ...}``, as AgentKit's ``createTool`` takes it.

AgentKit's hooks receive an object and return the new value: ``onStart({parameters})`` returns
the parameters, ``onFinish({result})`` the result. The keyword hooks of ``tool.step`` receive
the value itself. Both end up as the same three hooks on the :class:`Tool`, so the call path
(and what it journals) is the same whichever way a tool was written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from toolbridge._tools.invoke import Hook

__all__ = ["ErrorHook", "Hooks", "lifecycle_hooks"]

ErrorHook = Callable[[Any], Any]
"""``on_error(error)``: sees a failed call's ``ToolError``; returns a replacement, or ``None``."""

_SPELLINGS = {
    "on_start": "on_start",
    "onStart": "on_start",
    "on_finish": "on_finish",
    "onFinish": "on_finish",
    "on_error": "on_error",
    "onError": "on_error",
}


@dataclass(frozen=True)
class Hooks:
    on_start: Hook | None
    on_finish: Hook | None
    on_error: ErrorHook | None


def lifecycle_hooks(
    lifecycle: Mapping[str, Any] | None,
    *,
    on_start: Hook | None,
    on_finish: Hook | None,
    on_error: ErrorHook | None,
) -> Hooks:
    """The tool's hooks, from keyword arguments and ``lifecycle=`` (not both for one hook).

    Raises:
        TypeError: for a hook that is not a function, or a ``lifecycle`` that is not a mapping.
        ValueError: for an unknown key, or a hook given both ways.
    """
    given = {"on_start": on_start, "on_finish": on_finish, "on_error": on_error}
    for name, hook in given.items():
        if hook is not None and not callable(hook):
            raise TypeError(f"{name}= must be a function, got {hook!r}")
    if lifecycle is None:
        return Hooks(**given)
    if not isinstance(lifecycle, Mapping):
        raise TypeError('lifecycle= takes a dict: {"on_start": ..., "on_finish": ..., "on_error": ...}')
    for key, hook in lifecycle.items():
        if key not in _SPELLINGS:
            raise ValueError(
                f"unknown lifecycle hook {key!r}: use on_start, on_finish or on_error (or onStart, ...)"
            )
        if not callable(hook):
            raise TypeError(f"lifecycle[{key!r}] must be a function, got {hook!r}")
        name = _SPELLINGS[key]
        if given[name] is not None:
            raise ValueError(f"{name} is given twice: as {name}= and in lifecycle=; keep one")
        given[name] = _wrap(name, hook)
    return Hooks(**given)


def _wrap(name: str, hook: Callable[[dict[str, Any]], Any]) -> Hook:
    """A keyword-style hook that calls an AgentKit-style one with its object."""
    field = {"on_start": "parameters", "on_finish": "result", "on_error": "error"}[name]

    def as_keyword_hook(value: Any) -> Any:
        return hook({field: value})  # an awaitable it returns is awaited by the caller

    as_keyword_hook.__name__ = getattr(hook, "__name__", name)
    return as_keyword_hook
