"""The event bus: journals each event, then wakes matching waits and starts triggered work.

Every event is journaled before anyone sees it, so a wait that resumes after a crash still
finds an event sent before the crash. On a journal that daemons on several hosts share
(PostgreSQL), an event sent on one host wakes the matching waits on every other as it commits
(those go by the sending host's timestamp: an event counts if sent after the wait began).

Matching does not depend on the wall clock: a wait registered in this process gets every
matching event published after it registered, whatever their timestamps say; and the
timestamps this bus gives never go backwards (a wall clock set back an hour does not date a
new event before an older one), so the journal lookup a wait starts with finds what was sent
since its step began.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from toolbridge._journal.base import Journal
from toolbridge._records import now
from toolbridge._tools.events import Event

__all__ = ["EventBus"]

Match = Callable[[Event], bool]


class EventBus:
    """Publishes events: journals them, wakes matching waiters, and starts triggered work."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._waiters: list[tuple[str, float, Match | None, asyncio.Future[Event]]] = []
        self.on_event: list[Callable[[Event], None]] = []
        self._last = 0.0
        # Events other daemons send through a shared journal (PostgreSQL) wake our waits
        # too; triggered functions start only where the event was sent.
        journal.watch_events(lambda recorded: self._remote(Event.from_dict(recorded)))

    def clock(self) -> float:
        """Now, on the wall clock, but never before a time this bus gave earlier."""
        self._last = max(now(), self._last + 1e-6)
        return self._last

    def _remote(self, event: Event) -> None:
        for waiter in list(self._waiters):
            wanted, since, match, future = waiter
            if (
                wanted == event.name
                and event.ts >= since
                and not future.done()
                and (match is None or match(event))
            ):
                future.set_result(event)

    async def publish(self, name: str, data: Mapping[str, Any]) -> Event:
        """Send an event now. It is journaled before any waiter or trigger sees it."""
        event = Event(name=name, data=dict(data), id="evt_" + secrets.token_hex(10), ts=self.clock())
        await self._journal.record_event(event.to_dict())
        for waiter in list(self._waiters):
            wanted, _since, match, future = waiter
            # Registered before this publish: it is newer than the wait, whatever its time.
            if wanted == name and not future.done() and (match is None or match(event)):
                future.set_result(event)
        for listener in self.on_event:
            listener(event)
        return event

    async def wait(self, name: str, *, since: float, match: Match | None, timeout: float) -> Event | None:
        """The first event named ``name`` sent at or after ``since`` that matches, or ``None``."""
        future: asyncio.Future[Event] = asyncio.get_running_loop().create_future()
        waiter = (name, since, match, future)
        self._waiters.append(waiter)
        try:
            for recorded in await self._journal.events_since(name, since):
                event = Event.from_dict(recorded)
                if match is None or match(event):
                    return event
            try:
                return await asyncio.wait_for(asyncio.shield(future), max(timeout, 0))
            except TimeoutError:
                return None
        finally:
            self._waiters.remove(waiter)
            if not future.done():
                future.cancel()
