"""The journal's writer: one stdlib ``sqlite3`` connection on a daemon thread of its own.

A batch of the group commit runs there as one plain function (``BEGIN IMMEDIATE``, its
statements, ``COMMIT``), and its outcome comes back to the event loop with one
``call_soon_threadsafe``: one wake-up per batch, however many statements it holds. Through
aiosqlite each statement was a round trip between the loop and its thread.

The thread is a daemon, so a host that forgets to close its bridge still exits; a commit is
durable once its future resolves, so dying with the thread loses nothing acknowledged. The
journal's checkpoints run in a thread of this kind too, on a connection of their own
(:mod:`.checkpoints`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Writer"]

T = TypeVar("T")

_STOP = object()


class Writer:
    """Runs functions of one ``sqlite3.Connection`` in its own thread, one at a time, in order.

    Args:
        path: The database file.
        synchronous: ``NORMAL`` or ``FULL``.
        name: The thread's name, as debuggers and profilers show it.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, synchronous: str, name: str = "toolbridge-journal-writer"
    ) -> None:
        self._path = path
        self._synchronous = synchronous
        self._name = name
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self.connection: sqlite3.Connection | None = None

    async def start(self) -> None:
        """Open the connection in the writer's thread (the thread that will use it)."""
        self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
        self._thread.start()
        await self.run(self._connect)

    def _connect(self, _: sqlite3.Connection | None) -> None:
        # Autocommit mode: every batch is an explicit transaction.
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={self._synchronous}")
        db.execute("PRAGMA busy_timeout=5000")
        db.execute("PRAGMA wal_autocheckpoint=0")  # never inside a commit: see .checkpoints
        self.connection = db

    def run(self, job: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        """Queue ``job(connection)``; the future resolves in the loop with what it returned."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if self._thread is None or not self._thread.is_alive():
            future.set_exception(sqlite3.ProgrammingError("the journal writer is stopped"))
            return future
        self._jobs.put((job, loop, functools.partial(_settle, future)))
        return future

    def submit(
        self, job: Callable[[sqlite3.Connection], object], done: Callable[[BaseException | None], None]
    ) -> None:
        """Queue ``job(connection)``; ``done(error)`` is called in the loop once it has run.

        :meth:`run` without a future in between: the loop is woken once, straight into
        ``done``, rather than once to settle a future and again for its callbacks.

        Raises:
            sqlite3.ProgrammingError: the writer is stopped.
        """
        if self._thread is None or not self._thread.is_alive():
            raise sqlite3.ProgrammingError("the journal writer is stopped")
        self._jobs.put((job, asyncio.get_running_loop(), lambda _, error: done(error)))

    async def stop(self) -> None:
        """Close the connection once every job queued so far has run."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._jobs.put((_STOP, asyncio.get_running_loop(), functools.partial(_settle, done)))
        await done

    def _work(self) -> None:
        # Each job comes with what to call in its loop once it has run, with (value, error).
        while True:
            job, loop, then = self._jobs.get()
            stopping = job is _STOP
            if stopping:
                if self.connection is not None:
                    self.connection.close()
                    self.connection = None
                value, error = None, None
            else:
                try:
                    value, error = job(self.connection), None
                except BaseException as exc:  # handed to the awaiting coroutine
                    value, error = None, exc
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(then, value, error)
            if stopping:
                return


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():  # its awaiter was cancelled
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
