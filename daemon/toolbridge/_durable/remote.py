"""Calling a durable function that another daemon of the journal serves.

``function_ref("refund")`` and ``step.invoke(function="refund")`` look for the function on
the bridge serving the call first; when it has none, :func:`find_remote` reads the journal's
registry (``_journal/functions.py``) for a daemon that serves it now. The
:class:`RemoteFunction` found carries the trigger schema that daemon registered, so the
caller validates the data before anything is sent; calling it writes an invocation into the
journal, named after the calling step (a retry or a replay of that step finds the same
invocation, so the function never runs twice for one step), and waits for a serving daemon
to settle it (``_durable/serving.py`` runs it there as a durable run of its own).

While it waits, the caller looks now and then whether a daemon still serves the function;
when none does (they all closed, or died and their registrations expired), it settles the
invocation as failed itself (a compare-and-swap: a server that finished first wins) and
raises ``FunctionNotFound``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from toolbridge._errors import ToolError
from toolbridge._journal.functions import FunctionServer, FunctionStore, Invocation
from toolbridge._records import now
from toolbridge._schema.schema import schema_from
from toolbridge._tools.context import StepsAPI, not_served
from toolbridge._tools.events import Event, EventType

__all__ = ["RemoteFunction", "find_remote"]

FIRST_LOOK = 0.01
"""Seconds before the first look at an invocation; each look waits twice as long as the last
(unless a wake-up says it is settled: see ``_journal/wakeups.py``)."""
LOOK_AT_MOST = 0.25
"""The longest wait between two looks at an invocation (a serving daemon claims new ones
within ``serving.POLL_AT_MOST`` of their writing)."""
SERVERS_EVERY = 1.0
"""Seconds between two checks, while waiting, that some daemon still serves the function."""


class RemoteFunction:
    """A durable function another daemon of the journal serves, as the caller sees it.

    Args:
        server: Its live registration (the trigger's name and JSON Schema come from there).
        store: The journal's registry of functions and invocations.
    """

    def __init__(self, server: FunctionServer, store: FunctionStore) -> None:
        self.id = server.id
        self.description = server.description
        self.trigger = EventType(server.event_name, schema_from(server.schema))
        self._store = store

    def event(self, data: dict[str, Any], event_id: str) -> Event:
        return Event(name=self.trigger.name, data=data, id=event_id, ts=now())

    async def call(self, event: Event, step: StepsAPI, run_id: str) -> Any:
        """Send the call to a serving daemon through the journal; its result, or its error.

        Raises:
            ToolError: the function's own error, or ``FunctionNotFound`` when no daemon
                serves it any more.
        """
        settled = asyncio.Event()

        def on_wakeup(kind: str, key: str) -> None:
            if kind == "settled" and key == event.id:
                settled.set()

        unwatch = self._store.watch(on_wakeup)
        try:
            invocation = await self._store.request(
                Invocation(id=event.id, function_id=self.id, data=event.data, caller_run_id=run_id)
            )
            wait = FIRST_LOOK
            checked = time.monotonic()
            while invocation.state == "pending":
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(settled.wait(), wait)
                settled.clear()  # before looking: a wake-up from now on is not lost
                wait = min(wait * 2, LOOK_AT_MOST)
                found = await self._store.get(invocation.id)
                invocation = invocation if found is None else found
                if invocation.state == "pending" and time.monotonic() - checked >= SERVERS_EVERY:
                    checked = time.monotonic()
                    if not await self._store.servers(self.id):
                        invocation = await self._give_up(invocation)
        finally:
            unwatch()
        return outcome(invocation)

    async def _give_up(self, invocation: Invocation) -> Invocation:
        error = not_served(self.id).to_dict()
        await self._store.settle(invocation.id, "failed", output_json=None, error=error)
        return await self._store.get(invocation.id) or invocation


def outcome(invocation: Invocation) -> Any:
    """A settled invocation's result, or its error raised."""
    if invocation.state == "failed":
        raise ToolError.from_dict(invocation.error or {"message": "the function failed"})
    return None if invocation.output_json is None else json.loads(invocation.output_json)


async def find_remote(store: FunctionStore, function_id: str) -> RemoteFunction | None:
    """The function as a daemon of the journal serves it now, or ``None`` when none does."""
    servers = await store.servers(function_id)
    return RemoteFunction(servers[0], store) if servers else None
