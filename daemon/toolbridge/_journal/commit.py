"""Group commit: every write queued while one batch commits goes into the next batch together.

Concurrent callers share a commit, and a lone caller pays for one transaction. The batch is
handed to the dialect's executor, which runs it as one explicit transaction and gives each
write its own outcome: a value (a fence, "the call is allowed"), or a refusal that concerns
that write only (a run taken over). An executor that raises fails the whole batch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolbridge._errors import JournalError
from toolbridge._futures import fail_unawaited
from toolbridge._journal.statements import Write

__all__ = ["Done", "Eager", "Executor", "GroupCommit", "Pending", "awaiting"]

log = logging.getLogger("toolbridge")


@dataclass(eq=False)
class Pending:
    """One queued write: its latest parameters and everyone waiting for it.

    Writes of the same ``kind`` and ``key`` queued before one batch collapse into the last one
    (the last snapshot of a step wins), which also keeps a multi-row upsert from touching one
    row twice. A ``key`` of ``None`` never collapses.
    """

    kind: Write
    key: Hashable
    params: Any
    waiters: list[asyncio.Future[Any]] = field(default_factory=list)
    result: Any = None
    error: BaseException | None = None  # set by the executor to refuse this write alone


Done = Callable[[BaseException | None], None]
"""Told, in the event loop, that a batch is committed (``None``) or why it failed."""

Executor = Callable[[Sequence[Pending], Done], None]
"""Starts committing a batch, and calls ``done`` once; raising at once fails the batch."""


Eager = Callable[[Sequence[Pending]], bool]
"""Commits a batch at once, in the caller's turn, if it can do so without waiting.

Returns whether it did; raising fails the batch. Tried for a write that arrives while the
journal is idle: a lone caller then pays no turn of the loop for its commit, and waits on a
future that is already settled.
"""


def awaiting(execute: Callable[[Sequence[Pending]], Awaitable[None]]) -> Executor:
    """An :data:`Executor` from a coroutine function (a task per batch)."""

    def start(batch: Sequence[Pending], done: Done) -> None:
        task = asyncio.ensure_future(execute(batch))
        task.add_done_callback(lambda t: done(asyncio.CancelledError() if t.cancelled() else t.exception()))

    return start


class GroupCommit:
    """Queues writes and commits everything queued during the previous commit together.

    Driven by callbacks, not a flusher task: a batch starts in the loop's next turn (so every
    write queued in this turn joins it) and the next batch starts from the done-callback of
    the one before, which saves the hot path two turns of the event loop per commit. With an
    ``eager`` committer, the first write of a turn that finds the journal idle is committed
    at once instead (see :data:`Eager`).
    """

    def __init__(self, execute: Executor, *, eager: Eager | None = None) -> None:
        self._execute = execute
        self._eager = eager
        self._eager_this_turn = False  # one eager commit per turn: a burst is batched
        self._pending: dict[tuple[Write, Hashable], Pending] = {}
        self._scheduled = False  # a batch will start in the loop's next turn
        self._committing = False
        self._in_commit: dict[tuple[Write, Hashable], Pending] = {}  # the batch being committed
        self._idle: asyncio.Future[None] | None = None  # for drain(): set once nothing is queued

    def add(self, kind: Write, key: Hashable, params: Any) -> asyncio.Future[Any]:
        """Queue a write; the future resolves with its outcome once its batch is committed."""
        # Each writer has its own future: a writer cancelled while it waits cancels only its
        # wait, never the batch the others wait on.
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._add(kind, key, params).waiters.append(waiter)
        self._commit_or_schedule()
        return waiter

    def add_soon(self, kind: Write, key: Hashable, params: Any) -> None:
        """Queue a write nobody waits for: it commits with the next batch, or fails unseen
        (a batch that fails whole is logged)."""
        self._add(kind, key, params)
        self._commit_or_schedule()

    def _add(self, kind: Write, key: Hashable, params: Any) -> Pending:
        slot = (kind, object() if key is None else key)
        pending = self._pending.get(slot)
        if pending is None:
            pending = self._pending[slot] = Pending(kind, key, params)
        else:
            pending.params = params
        return pending

    def _commit_or_schedule(self) -> None:
        if not self._committing and not self._scheduled:
            loop = asyncio.get_running_loop()
            if self._eager is not None and not self._eager_this_turn and self._commit_eagerly(loop):
                return  # already settled: awaiting the write does not even yield
            self._scheduled = True
            loop.call_soon(self._start)

    def latest(self, kind: Write, key: Hashable) -> Any | None:
        """The parameters of the last write of ``kind`` and ``key`` not yet committed, if any.

        A reader that looks here first reads its own writes: a step written a moment ago reads
        back as written, whether or not its batch has committed yet.
        """
        pending = self._pending.get((kind, key)) or self._in_commit.get((kind, key))
        return None if pending is None else pending.params

    def _commit_eagerly(self, loop: asyncio.AbstractEventLoop) -> bool:
        # Later writes of this turn wait for the next one, together: a burst of writes (many
        # calls finishing at once) is one transaction, not one each.
        self._eager_this_turn = True
        loop.call_soon(self._next_turn)
        batch = list(self._pending.values())
        try:
            assert self._eager is not None
            if not self._eager(batch):
                return False
        except Exception as exc:
            self._pending = {}
            self._failed(batch, exc)
            return True
        self._pending = {}
        _settle(batch)
        return True

    def _next_turn(self) -> None:
        self._eager_this_turn = False

    def _start(self) -> None:
        self._scheduled = False
        if not self._pending:
            self._set_idle()
            return
        self._in_commit, self._pending = self._pending, {}
        batch = list(self._in_commit.values())
        self._committing = True
        try:
            self._execute(batch, lambda error: self._committed(batch, error))
        except Exception as exc:  # the executor refused at once (e.g. the writer is stopped)
            self._committed(batch, exc)

    def _committed(self, batch: Sequence[Pending], error: BaseException | None) -> None:
        self._committing = False
        self._in_commit = {}
        if isinstance(error, asyncio.CancelledError):
            for pending in batch:
                pending.error = JournalError("the journal was closed while the write waited")
            _settle(batch)
        elif error is not None:
            self._failed(batch, error)
        else:
            _settle(batch)
        self._start()  # what was queued meanwhile is the next batch, at once

    def _failed(self, batch: Sequence[Pending], exc: BaseException) -> None:
        log.error("journal write failed: %s", exc)
        failure = JournalError(f"journal write failed: {exc}")
        for pending in batch:
            pending.error = failure
        _settle(batch)

    def _set_idle(self) -> None:
        if self._idle is not None and not self._idle.done():
            self._idle.set_result(None)
        self._idle = None

    async def drain(self) -> None:
        """Return once every write queued so far is committed (or has failed)."""
        while self._committing or self._scheduled or self._pending:
            if self._idle is None:
                self._idle = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._idle)


def _settle(batch: Sequence[Pending]) -> None:
    for pending in batch:
        for waiter in pending.waiters:
            if waiter.done():  # its writer was cancelled
                continue
            if pending.error is not None:
                fail_unawaited(waiter, pending.error)
            else:
                waiter.set_result(pending.result)
