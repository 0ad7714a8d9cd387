"""Calling user code that may be sync or async: handlers, hooks, confirmation checks."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from toolbridge._tools.threads import run_in_thread

__all__ = ["call_hook", "call_maybe_async", "is_async_callable", "takes_context"]

Hook = Callable[[Any], Any]


def is_async_callable(func: Callable[..., Any]) -> bool:
    """Whether calling ``func`` returns a coroutine (an ``async def``, or an object's one)."""
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(getattr(func, "__call__", None))  # noqa: B004


async def call_maybe_async(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    if is_async_callable(func):
        return await func(*args, **kwargs)
    result = await run_in_thread(func, *args, **kwargs)  # tracked: attempts never overlap
    if inspect.isawaitable(result):
        return await result
    return result


async def call_hook(hook: Hook, value: Any) -> Any:
    """Run a lifecycle hook; a hook returning ``None`` leaves the value unchanged."""
    changed = hook(value)
    if inspect.isawaitable(changed):
        changed = await changed
    return value if changed is None else changed


def takes_context(run: Callable[..., Any]) -> bool:
    try:
        parameters = list(inspect.signature(run).parameters.values())
    except ValueError:
        return True
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return True
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not 1 <= len(positional) <= 2:
        raise TypeError(
            f"run={run!r} must take (args) or (args, ctx); it takes {len(positional)} positional parameters"
        )
    return len(positional) == 2
