"""Durable functions started by events: each matching event starts its own run, once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from toolbridge._tools.context import StepsAPI
from toolbridge._tools.events import Event
from toolbridge._tools.registry import Registry

__all__ = ["Triggers"]

log = logging.getLogger("toolbridge")

RunEntry = Callable[[str], contextlib.AbstractAsyncContextManager[StepsAPI]]
"""Enters a durable run by id (``bridge.run``) and yields its steps."""


class Triggers:
    """Listens on the event bus and runs each function an event triggers, as run ``{id}/{event}``.

    The run id comes from the event, so a replayed ``send_event`` (which sends nothing again)
    starts nothing again, and a function run that crashed resumes when entered once more.
    """

    def __init__(self, registry: Registry, background: set[asyncio.Future[Any]], run: RunEntry) -> None:
        self._registry = registry
        self._background = background
        self._run = run

    def on_event(self, event: Event) -> None:
        for function in self._registry.triggered_by(event.name):
            task = asyncio.ensure_future(self._start(function.id, event))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _start(self, function_id: str, event: Event) -> None:
        function = self._registry.functions[function_id]
        try:
            data = function.trigger.validate(event.data) if function.trigger else event.data
            async with self._run(f"{function.id}/{event.id}") as step:
                await function.call(Event(event.name, data, event.id, event.ts), step, step.run_id)
        except Exception:  # the run is journaled as failed; nobody awaits a triggered run
            log.exception("function %r failed on event %s", function.id, event.id)
