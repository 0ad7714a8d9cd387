"""Events: what ``step.send_event`` sends, ``step.wait_for_event`` waits for, and triggers start.

Every event is journaled before anyone sees it, so a wait that resumes after a crash still
finds an event sent before the crash.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolbridge._journal import Journal
from toolbridge._records import now
from toolbridge._schema import Schema, schema_from

__all__ = ["Event", "EventBus", "EventType", "event_type"]


@dataclass(frozen=True)
class Event:
    """Something that happened, with its data.

    Attributes:
        name: The event's name, like ``"order/refunded"``.
        data: Its data, as plain JSON values.
        id: A unique id, given when it is sent.
        ts: When it was sent, in seconds since the epoch.
    """

    name: str
    data: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    ts: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "data": self.data, "id": self.id, "ts": self.ts}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Event:
        return cls(
            name=value["name"],
            data=dict(value.get("data") or {}),
            id=value.get("id", ""),
            ts=value.get("ts", 0.0),
        )


@dataclass(frozen=True)
class EventType:
    """A named kind of event, optionally with a schema its data must match.

    Create one with :func:`event_type`; use it as a durable function's trigger.
    """

    name: str
    schema: Schema | None = None

    def validate(self, data: Any) -> dict[str, Any]:
        """Check ``data`` against the schema; return it as plain JSON values.

        Raises:
            SchemaValidationError: naming each offending field.
        """
        if self.schema is None:
            return dict(data)
        value = self.schema.to_jsonable(self.schema.validate_python(data, strict=False))
        return dict(value)


def event_type(name: str, *, schema: Any = None) -> EventType:
    """Declare an event by name, with an optional schema (a pydantic model or a JSON Schema).

    Raises:
        ValueError: for an empty name.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("an event type needs a non-empty name, like 'order/refund'")
    return EventType(name, schema_from(schema))


Match = Callable[[Event], bool]


class EventBus:
    """Publishes events: journals them, wakes matching waiters, and starts triggered work."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._waiters: list[tuple[str, float, Match | None, asyncio.Future[Event]]] = []
        self.on_event: list[Callable[[Event], None]] = []

    async def publish(self, name: str, data: Mapping[str, Any]) -> Event:
        """Send an event now. It is journaled before any waiter or trigger sees it."""
        event = Event(name=name, data=dict(data), id="evt_" + secrets.token_hex(10), ts=now())
        await self._journal.record_event(event.to_dict())
        for waiter in list(self._waiters):
            wanted, since, match, future = waiter
            if wanted == name and event.ts >= since and not future.done() and (match is None or match(event)):
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
