"""Waking calls that wait on a person: at once for a decision made in this process, by a
short poll of the journal for one made in another (``toolbridge approvals`` on the same file).

SQLite tells no other process of a change, so a waiting bridge looks at its pending requests
every :data:`POLL_INTERVAL` seconds; the poll runs only while some call waits.
"""

from __future__ import annotations

import asyncio
import contextlib

from toolbridge._journal.approvals import ApprovalRequest, ApprovalStore
from toolbridge._journal.base import Journal

__all__ = ["POLL_INTERVAL", "ApprovalHub"]

POLL_INTERVAL = 0.1
"""Seconds between two looks at the journal for decisions made by another process."""


class ApprovalHub:
    """The requests this process waits on, and the wake-ups for their decisions."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._waiters: dict[str, asyncio.Future[ApprovalRequest]] = {}
        self._poller: asyncio.Task[None] | None = None

    @property
    def store(self) -> ApprovalStore:
        return self._journal.approvals

    def notify(self, decided: ApprovalRequest) -> None:
        """Wake the call waiting on ``decided`` (decided in this process)."""
        waiter = self._waiters.get(decided.id)
        if waiter is not None and not waiter.done():
            waiter.set_result(decided)

    async def wait(self, req: ApprovalRequest, timeout: float) -> ApprovalRequest | None:
        """``req`` once it is decided, or ``None`` if ``timeout`` passes first."""
        waiter = self._waiters.get(req.id)
        if waiter is None:
            waiter = self._waiters[req.id] = asyncio.get_running_loop().create_future()
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll())
        try:
            async with asyncio.timeout(max(0.0, timeout)):
                return await asyncio.shield(waiter)
        except TimeoutError:
            return None
        finally:
            if self._waiters.get(req.id) is waiter:
                del self._waiters[req.id]

    async def _poll(self) -> None:
        while self._waiters:
            await asyncio.sleep(POLL_INTERVAL)
            for request_id, waiter in list(self._waiters.items()):
                with contextlib.suppress(Exception):  # a closed journal: the waits end anyway
                    current = await self.store.get(request_id)
                    if current is not None and current.state != "pending" and not waiter.done():
                        waiter.set_result(current)
