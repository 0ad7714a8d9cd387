"""Start records of calls that take a while: journaled by one timer, not one timer per call.

A fast call reaches the journal once, with its outcome. A call still running after
:data:`START_RECORD_DELAY` is journaled as running, so that the trace shows it. Every call
waits the same delay, so the calls due form a queue in start order, and one timer (armed
for the oldest, and no sooner than :data:`SWEEP_SLACK` after the sweep before) serves all of
a run's calls instead of a timer handle per call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

from toolbridge._errors import JournalError
from toolbridge._journal.base import Journal
from toolbridge._records import StepRecord

__all__ = ["START_RECORD_DELAY", "StartRecords"]

START_RECORD_DELAY = 0.05
"""Seconds before a call that is still running is journaled as running."""

SWEEP_SLACK = START_RECORD_DELAY / 2
"""How late a start record may be: a sweep serves every call due within this much of the
next one. Armed for the oldest call alone, the timer fired once per call of a busy run."""


class StartRecords:
    """The calls of one run waiting to be journaled as running, oldest first."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._due: deque[tuple[float, StepRecord]] = deque()
        self._timer: asyncio.TimerHandle | None = None

    def watch(self, rec: StepRecord) -> None:
        """Journal ``rec`` as running if it still is after :data:`START_RECORD_DELAY`."""
        loop = asyncio.get_running_loop()
        self._due.append((loop.time() + START_RECORD_DELAY, rec))
        if self._timer is None:
            self._timer = loop.call_at(self._due[0][0], self._sweep, loop)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        clock = loop.time()
        while self._due and self._due[0][0] <= clock:
            _, rec = self._due.popleft()
            if rec.status == "running":
                with contextlib.suppress(JournalError):  # the bridge closed meanwhile
                    self._journal.write_soon(rec)
        if self._due:
            self._timer = loop.call_at(max(self._due[0][0], clock + SWEEP_SLACK), self._sweep, loop)
