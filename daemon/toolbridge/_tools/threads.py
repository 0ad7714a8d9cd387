"""Sync tools run in worker threads, which nobody can stop: attempts wait for theirs.

A sync handler that outlives its ``tool_timeout`` keeps running in its thread after the
attempt has failed. Starting the retry then would run the step twice at once, with one
idempotency key. So every thread an attempt starts is tracked, and the next attempt of the
step starts only once the earlier one's threads have returned (an async handler is
cancelled at its timeout and needs no such wait).

The pool is our own rather than a ``ThreadPoolExecutor``: a job is a plain queue entry whose
thread settles the awaiting future with one ``call_soon_threadsafe``, where the executor's
path (a semaphore to decide whether to grow, a ``concurrent.futures.Future`` with its
condition, ``wrap_future``'s chained callbacks) cost more than the hop itself on the hot path.
A job goes to the idle worker that finished last (its memory is the warmest), woken on the
loop's own CPU (:mod:`toolbridge._affinity`: on a 2-vCPU VM, a sync tool's p50 went from 1.60x
to 1.42x a bare gRPC echo); when every worker is busy, it waits in a queue that the next worker
to finish takes from.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from toolbridge._affinity import Sleeper

__all__ = ["run_in_thread", "track_threads", "untrack", "wait_for_threads"]

MAX_THREADS = min(32, (os.cpu_count() or 1) + 4)
"""As many sync tool calls run at once (asyncio's default pool size); more wait their turn."""


class _Job:
    """One call of a sync function in a worker thread, and who waits for it to return."""

    __slots__ = ("call", "future", "loop", "returned", "waiters")

    def __init__(self, call: Callable[[], Any], loop: asyncio.AbstractEventLoop) -> None:
        self.call = call
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.returned = False  # the thread is done with it (set in the loop)
        self.waiters: list[asyncio.Future[None]] = []

    def settle(self, value: Any, error: BaseException | None) -> None:
        """In the loop: hand the outcome to the caller (if it still waits) and the waiters."""
        self.returned = True
        if not self.future.done():  # its caller was cancelled (a timeout): nobody wants it
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(value)
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(None)


class _Worker(Sleeper):
    """A worker thread, and the queue it sleeps on between jobs."""

    __slots__ = ("jobs",)

    def __init__(self) -> None:
        super().__init__()
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()


class _Pool:
    """Worker threads, added while all are busy, up to ``limit``; then jobs wait their turn."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._threads = 0
        self._idle: list[_Worker] = []  # the one that finished last, last
        self._waiting: collections.deque[_Job] = collections.deque()  # while every worker is busy

    def submit(self, job: _Job) -> None:
        with self._lock:
            if self._idle:
                worker: _Worker | None = self._idle.pop()
            elif self._threads < self._limit:
                self._threads += 1
                worker = None
            else:
                self._waiting.append(job)
                return
        if worker is None:
            threading.Thread(target=self._work, args=(job,), name="toolbridge-tool", daemon=True).start()
            return
        worker.wake_here()
        worker.jobs.put(job)

    def _work(self, job: _Job) -> None:
        worker = _Worker()
        while True:
            try:
                value, error = job.call(), None
            except BaseException as exc:  # handed to the awaiting coroutine
                value, error = None, exc
            del job.call  # the arguments may be large: let them go now
            with self._lock:
                following = self._waiting.popleft() if self._waiting else None
                if following is None:
                    self._idle.append(worker)  # before the answer: a call it leads to finds us idle
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                job.loop.call_soon_threadsafe(job.settle, value, error)
            if following is None:
                worker.asleep = True
                following = worker.jobs.get()
                worker.woke()
            job = following


_pool = _Pool(MAX_THREADS)

_tracked: contextvars.ContextVar[list[_Job] | None] = contextvars.ContextVar(
    "toolbridge_attempt_threads", default=None
)


async def run_in_thread(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)`` in a worker thread, tracked by the attempt that started it.

    The thread sees the caller's context variables (a span, for example). Cancelling this
    await leaves the thread to run on; the attempt's :func:`wait_for_threads` waits for it.
    """
    context = contextvars.copy_context()
    job = _Job(lambda: context.run(func, *args, **kwargs), asyncio.get_running_loop())
    threads = _tracked.get()
    if threads is not None:
        threads.append(job)
    _pool.submit(job)
    return await job.future


def track_threads() -> tuple[list[_Job], contextvars.Token[list[_Job] | None]]:
    """Track the threads started (by :func:`run_in_thread`) from here until :func:`untrack`.

    A pair of calls rather than a context manager: it runs once per call on the hot path.
    """
    threads: list[_Job] = []
    return threads, _tracked.set(threads)


def untrack(token: contextvars.Token[list[_Job] | None]) -> None:
    _tracked.reset(token)


async def wait_for_threads(threads: list[_Job]) -> None:
    """Return once every tracked thread has returned (its outcome is not wanted any more)."""
    for job in threads:
        if not job.returned:
            waiter: asyncio.Future[None] = job.loop.create_future()
            job.waiters.append(waiter)
            await waiter
