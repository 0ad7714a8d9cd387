"""Named places where a test can kill the daemon, to prove what survives a crash.

Armed only through the environment, read once at import:
``TOOLBRIDGE_FAILPOINTS=after_step_started`` kills the process with SIGKILL the first time
that point is reached; ``name:3`` kills it the third time. Unarmed, :func:`hit` is a set
lookup.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")

POINTS = frozenset(
    {
        "before_step_started",  # a call arrived; nothing recorded yet
        "after_step_started",  # the step is recorded as running (awaited for at-most-once tools)
        "while_tool_runs",  # the tool's body has started and is waiting on something
        "after_tool_returned",  # the tool returned; its result is not yet recorded
        "after_result_recorded",  # the result is committed; the reply is not yet sent
    }
)


def _parse(spec: str) -> dict[str, int]:
    armed: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, count = item.partition(":")
        if name not in POINTS:
            raise ValueError(f"unknown failpoint {name!r}; known: {', '.join(sorted(POINTS))}")
        armed[name] = int(count or 1)
    return armed


_ARMED = _parse(os.environ.get("TOOLBRIDGE_FAILPOINTS", ""))
_hits: Counter[str] = Counter()


def hit(name: str) -> None:
    """Kill this process here if the failpoint ``name`` is armed for this hit."""
    if name in _ARMED:
        _hits[name] += 1
        if _hits[name] == _ARMED[name]:
            os.kill(os.getpid(), signal.SIGKILL)


def during(name: str, work: Awaitable[T]) -> Awaitable[T]:
    """``work``, or, if ``name`` is armed, ``work`` that kills the process once it has started.

    Unarmed, ``work`` itself: the tool's own coroutine is awaited, with no layer around it.
    """
    if name not in _ARMED:
        return work
    return _killed_during(name, work)


async def _killed_during(name: str, work: Awaitable[T]) -> T:
    task = asyncio.ensure_future(work)
    await asyncio.sleep(0)  # let the tool run up to its first await
    hit(name)
    return await task
