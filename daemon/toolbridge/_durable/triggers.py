"""Durable functions run by their events, and resumed when the daemon running them died.

A triggered function runs as the run ``FUNCTION_ID/EVENT_ID``, started where the event was
sent. When that daemon dies, the run stays ``running`` in the journal under a lease nobody
renews (or none, when the daemon shut down mid-run). A bridge opened with ``recover=True``
looks for such runs when it opens and then every half lease, and enters each one of its own
functions' runs again with the event that started it: the lease is taken over (the fence
goes up, so the dead owner can never write again), completed steps replay from the journal,
and the rest runs here. Recovering daemons may race for one run: entering is atomic, and the
losers get ``RunBusyError`` and leave it to the winner.

Runs that host code entered (``bridge.run("order-42")``) are not resumed: only that code
knows what they do; entering them again (after the lease expired) replays them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from toolbridge._durable.runs import Runs
from toolbridge._durable.steps import Steps
from toolbridge._durations import Duration
from toolbridge._errors import JournalError, RunBusyError
from toolbridge._tools.events import Event
from toolbridge._tools.functions import DurableFunction
from toolbridge._tools.registry import Registry

__all__ = ["Triggers"]

log = logging.getLogger("toolbridge")


class EnterRun(Protocol):
    """Enters a run (``bridge.run``)."""

    def __call__(
        self, run_id: str, *, wait: Duration | None = None
    ) -> AbstractAsyncContextManager[Steps]: ...


class Triggers:
    """Starts a bridge's durable functions on their events, and resumes orphaned runs of them.

    Args:
        registry: The bridge's durable functions (read when an event arrives).
        enter: Enters a run (``bridge.run``).
        runs: The bridge's open runs (never orphans), their journal and their lease.
        background: Where started runs go; the bridge cancels them when it closes.
        recover: Resume orphaned runs once the bridge is open (``recover=True``).
    """

    def __init__(
        self,
        registry: Registry,
        enter: EnterRun,
        runs: Runs,
        background: set[asyncio.Future[Any]],
        *,
        recover: bool = False,
    ) -> None:
        self.recovering = bool(recover)
        self._registry = registry
        self._enter = enter
        self._journal = runs.journal
        self._runs = runs
        self._background = background
        self._resuming: set[str] = set()

    def on_event(self, event: Event) -> None:
        """Start every function that ``event`` triggers, each as a run of its own."""
        for function in self._registry.triggered_by(event.name):
            self._start(function, event)

    def _start(self, function: DurableFunction, event: Event) -> asyncio.Future[None]:
        task = asyncio.ensure_future(self._run(function, event))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _run(self, function: DurableFunction, event: Event) -> None:
        try:
            data = function.trigger.validate(event.data) if function.trigger else event.data
            # Not waited for: a run another daemon holds is that daemon's to finish.
            async with self._enter(f"{function.id}/{event.id}", wait=0) as step:
                await function.call(Event(event.name, data, event.id, event.ts), step, step.run_id)
        except RunBusyError as exc:  # another daemon runs it (or resumed it first)
            log.info("function %r on event %s: %s", function.id, event.id, exc)
        except Exception:  # the run is journaled as failed; nobody awaits a triggered run
            log.exception("function %r failed on event %s", function.id, event.id)

    def opened(self) -> None:
        """The bridge is open: when recovering, resume orphans now and every half lease."""
        if not self.recovering:
            return
        task = asyncio.ensure_future(self._watch())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _watch(self) -> None:
        while True:
            try:
                await self.resume_orphans()
            except JournalError as exc:  # the journal is away for now: look again later
                log.warning("recovery could not read the journal: %s", exc)
            await asyncio.sleep(max(0.1, self._runs.lease / 2))

    async def resume_orphans(self) -> list[str]:
        """Start resuming every orphaned run of a known function; returns their ids."""
        started = []
        for run in await self._journal.orphaned_runs():
            function_id, _, event_id = run.run_id.rpartition("/")
            function = self._registry.functions.get(function_id)
            if function is None or run.run_id in self._resuming or self._runs.get(run.run_id) is not None:
                continue
            recorded = await self._journal.get_event(event_id)
            if recorded is None:
                continue
            log.info("resuming run %r: %s left it or let its lease expire", run.run_id, run.owner)
            self._resuming.add(run.run_id)
            task = self._start(function, Event.from_dict(recorded))
            task.add_done_callback(functools.partial(_forget, self._resuming, run.run_id))
            started.append(run.run_id)
        return started


def _forget(resuming: set[str], run_id: str, _task: asyncio.Future[None]) -> None:
    resuming.discard(run_id)
