"""Events: what ``step.send_event`` sends, ``step.wait_for_event`` waits for, and triggers start.

The bus that journals and delivers them is ``_durable.eventbus``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolbridge._schema.schema import Schema, schema_from

__all__ = ["Event", "EventType", "event_type"]


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
