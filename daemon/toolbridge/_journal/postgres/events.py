"""Events across hosts: ``NOTIFY`` when one is recorded, ``LISTEN`` on every daemon.

Recording an event sends a notice on the ``toolbridge_events`` channel in the same
transaction, so other daemons hear of it when it commits and never of one that rolled back.
A notice carries the event itself when it fits (``NOTIFY`` payloads stop at 8000 bytes), or
only its id, and the listener reads the event from the journal.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

__all__ = ["CHANNEL", "Notices", "notice"]

log = logging.getLogger("toolbridge")

CHANNEL = "toolbridge_events"
_INLINE_LIMIT = 7000

EventListener = Callable[[dict[str, Any]], None]


def notice(owner: str, event_id: str, name: str, data_json: str, ts_ms: int) -> str:
    """The payload announcing an event that ``owner`` records."""
    note: dict[str, Any] = {"owner": owner, "id": event_id}
    if len(data_json) + len(name) < _INLINE_LIMIT:
        note["event"] = {"id": event_id, "name": name, "data": json.loads(data_json), "ts": ts_ms / 1000}
    return json.dumps(note)


class Notices:
    """Hands the events other daemons record to this daemon's listeners.

    Args:
        owner: This journal's owner id: its own notices are skipped (its bus saw the event).
        fetch: Reads an event by id, for notices too big to carry it.
    """

    def __init__(self, owner: str, fetch: Callable[[str], Awaitable[dict[str, Any] | None]]) -> None:
        self._owner = owner
        self._fetch = fetch
        self._listeners: list[EventListener] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def watch(self, listener: EventListener) -> None:
        self._listeners.append(listener)

    def heard(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        """asyncpg's ``LISTEN`` callback."""
        try:
            note = json.loads(str(payload))
        except ValueError:
            return
        if note.get("owner") == self._owner:
            return
        if "event" in note:
            self._deliver(note["event"])
            return
        self.spawn(self._fetch_and_deliver(str(note.get("id"))))

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` in the background until :meth:`close`."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _fetch_and_deliver(self, event_id: str) -> None:
        event = await self._fetch(event_id)
        if event is not None:
            self._deliver(event)

    def _deliver(self, event: dict[str, Any]) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # one broken listener must not starve the others
                log.exception("event listener failed")

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
