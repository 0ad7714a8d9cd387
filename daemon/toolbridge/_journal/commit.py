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

__all__ = ["GroupCommit", "Pending"]

log = logging.getLogger("toolbridge")


@dataclass(eq=False)
class Pending:
    """One queued write: its latest parameters and everyone waiting for it.

    Writes of the same ``kind`` and ``key`` queued before one batch collapse into the last one
    (the last snapshot of a step wins), which also keeps a multi-row upsert from touching one
    row twice. A ``key`` of ``None`` never collapses.
    """

    kind: str
    key: Hashable
    params: Any
    waiters: list[asyncio.Future[Any]] = field(default_factory=list)
    result: Any = None
    error: BaseException | None = None  # set by the executor to refuse this write alone


Executor = Callable[[Sequence[Pending]], Awaitable[None]]


class GroupCommit:
    """Queues writes and commits everything queued during the previous commit together."""

    def __init__(self, execute: Executor) -> None:
        self._execute = execute
        self._pending: dict[tuple[str, Hashable], Pending] = {}
        self._committing: dict[tuple[str, Hashable], Pending] = {}  # the batch being committed
        self._flusher: asyncio.Task[None] | None = None

    def add(self, kind: str, key: Hashable, params: Any) -> asyncio.Future[Any]:
        """Queue a write; the future resolves with its outcome once its batch is committed."""
        loop = asyncio.get_running_loop()
        slot = (kind, object() if key is None else key)
        pending = self._pending.get(slot)
        if pending is None:
            pending = self._pending[slot] = Pending(kind, key, params)
        else:
            pending.params = params
        # Each writer has its own future: a writer cancelled while it waits cancels only its
        # wait, never the batch the others wait on.
        waiter: asyncio.Future[Any] = loop.create_future()
        waiter.add_done_callback(_consume_exception)  # nobody may await a fire-and-forget write
        pending.waiters.append(waiter)
        if self._flusher is None or self._flusher.done():
            self._flusher = loop.create_task(self._flush())
        return waiter

    def latest(self, kind: str, key: Hashable) -> Any | None:
        """The parameters of the last write of ``kind`` and ``key`` not yet committed, if any.

        A reader that looks here first reads its own writes: a step written a moment ago reads
        back as written, whether or not its batch has committed yet.
        """
        pending = self._pending.get((kind, key)) or self._committing.get((kind, key))
        return None if pending is None else pending.params

    async def _flush(self) -> None:
        while self._pending:
            self._committing, self._pending = self._pending, {}
            batch = list(self._committing.values())
            try:
                await self._execute(batch)
            except Exception as exc:
                log.error("journal write failed: %s", exc)
                failure = JournalError(f"journal write failed: {exc}")
                for pending in batch:
                    pending.error = failure
            except BaseException:
                for pending in batch:
                    pending.error = JournalError("the journal was closed while the write waited")
                self._committing = {}
                _settle(batch)
                raise
            self._committing = {}
            _settle(batch)

    async def drain(self) -> None:
        """Return once every write queued so far is committed (or has failed)."""
        while self._flusher is not None and not self._flusher.done():
            await asyncio.shield(self._flusher)


def _settle(batch: Sequence[Pending]) -> None:
    for pending in batch:
        for waiter in pending.waiters:
            if waiter.done():  # its writer was cancelled
                continue
            if pending.error is not None:
                waiter.set_exception(pending.error)
            else:
                waiter.set_result(pending.result)


def _consume_exception(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
