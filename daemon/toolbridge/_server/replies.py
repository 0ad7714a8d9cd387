"""The answers of one call stream, written in order by whichever call's task is at hand.

grpc allows one write in flight per stream. Rather than a queue drained by a task of its own
(a turn of the event loop per answer to wake it, and another for the generator grpc drives),
the task that has an answer writes it at once, and while it writes, later answers wait in a
queue that it drains before it returns. To a client that reads batches, the answers queued
while a write was in flight go out together, in one message.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from typing import Any

from grpc import aio

__all__ = ["BATCH_BYTES", "Replies"]

BATCH_BYTES = 1024 * 1024
"""The most a batch of answers holds (one answer alone may hold more, up to its own limit)."""

log = logging.getLogger("toolbridge")


class Replies:
    """Writes the messages of one server stream, one at a time, in the order sent."""

    def __init__(
        self, context: aio.ServicerContext[Any, Any], batch: Callable[[list[Any]], Any] | None = None
    ) -> None:
        """``batch`` makes one message of several (for a client that reads batches)."""
        self._context = context
        self._batch = batch
        self._queue: collections.deque[Any] = collections.deque()
        self._writing = False
        self._posted: set[asyncio.Task[None]] = set()
        self.closed = False
        """Set once a write failed: the client has gone, and later answers are dropped."""

    async def send(self, message: Any) -> None:
        """Write ``message`` (or leave it to the task writing now); returns once it is handed on."""
        if self.closed:
            return
        self._queue.append(message)
        if self._writing:
            return  # the task writing now writes this one too
        self._writing = True
        try:
            while self._queue:
                await self._context.write(self._next_message())
        except Exception as exc:  # the stream ended under us: nobody is left to read
            log.debug("a call stream's answer was not delivered: %s", exc)
            self.closed = True
            self._queue.clear()
        finally:
            self._writing = False

    def _next_message(self) -> Any:
        queue = self._queue
        if self._batch is None or len(queue) == 1:
            return queue.popleft()
        taken = [queue.popleft()]
        size = taken[0].ByteSize()
        while queue and size + (next_size := queue[0].ByteSize()) <= BATCH_BYTES:
            taken.append(queue.popleft())
            size += next_size
        return self._batch(taken)

    def post(self, message: Any) -> None:
        """:meth:`send` from code that cannot wait (a callback)."""
        task = asyncio.ensure_future(self.send(message))
        self._posted.add(task)
        task.add_done_callback(self._posted.discard)

    async def flush(self) -> None:
        """Return once every message posted so far is written (or dropped)."""
        while self._posted:
            await asyncio.wait(set(self._posted))
