"""Sync tools run in worker threads, which nobody can stop: attempts wait for theirs.

A sync handler that outlives its ``tool_timeout`` keeps running in its thread after the
attempt has failed. Starting the retry then would run the step twice at once, with one
idempotency key. So every thread an attempt starts is tracked, and the next attempt of the
step starts only once the earlier one's threads have returned (an async handler is
cancelled at its timeout and needs no such wait).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import os
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["attempt_threads", "run_in_thread", "wait_for_threads"]

_executor: concurrent.futures.ThreadPoolExecutor | None = None
# Our own pool (sized as asyncio's default one) because waiting needs the thread's own future:
# the one asyncio.to_thread awaits is cancelled with its caller while the thread runs on.

_tracked: contextvars.ContextVar[list[concurrent.futures.Future[Any]] | None] = contextvars.ContextVar(
    "toolbridge_attempt_threads", default=None
)


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _executor
    if _executor is None:
        workers = min(32, (os.cpu_count() or 1) + 4)
        _executor = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="toolbridge-tool")
    return _executor


async def run_in_thread(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)`` in a worker thread, tracked by the attempt that started it."""
    context = contextvars.copy_context()
    future = _pool().submit(functools.partial(context.run, func, *args, **kwargs))
    threads = _tracked.get()
    if threads is not None:
        threads.append(future)
    # Cancelling this await cancels a thread that has not started; one that runs, runs on.
    return await asyncio.wrap_future(future)


@contextlib.contextmanager
def attempt_threads() -> Iterator[list[concurrent.futures.Future[Any]]]:
    """Track the threads started (by :func:`run_in_thread`) within the block."""
    threads: list[concurrent.futures.Future[Any]] = []
    token = _tracked.set(threads)
    try:
        yield threads
    finally:
        _tracked.reset(token)


async def wait_for_threads(threads: list[concurrent.futures.Future[Any]]) -> None:
    """Return once every tracked thread has returned (its outcome is not wanted any more)."""
    for future in threads:
        if not future.done():
            with contextlib.suppress(BaseException):
                await asyncio.wrap_future(future)
