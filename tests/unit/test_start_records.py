"""Slow calls are journaled as running, by one timer per run; fast ones only with their outcome."""

from __future__ import annotations

import asyncio
from typing import Any

from toolbridge._durable.startrecords import START_RECORD_DELAY, StartRecords
from toolbridge._records import StepRecord

WAIT = 5.0


class RecordingJournal:
    """Only what StartRecords uses of a journal: ``write``, noting what it was given."""

    def __init__(self) -> None:
        self.written: list[tuple[str, str]] = []
        self.changed = asyncio.Event()

    def write(self, rec: StepRecord) -> Any:
        self.written.append((rec.key, rec.status))
        self.changed.set()


def step(key: str) -> StepRecord:
    return StepRecord(run_id="r", key=key, parent_key=None, seq=1, kind="tool", name="t", idempotency_key="k")


async def test_calls_still_running_after_the_delay_are_journaled_as_running_finished_ones_not() -> None:
    journal = RecordingJournal()
    records = StartRecords(journal)  # type: ignore[arg-type]
    slow, fast, later = step("slow"), step("fast"), step("later")
    loop = asyncio.get_running_loop()
    started = loop.time()
    records.watch(slow)
    records.watch(fast)
    fast.complete('"done"')  # finished before the delay: its outcome write is its only one
    await asyncio.wait_for(journal.changed.wait(), WAIT)
    assert loop.time() - started >= START_RECORD_DELAY * 0.9
    assert journal.written == [("slow", "running")]
    journal.changed.clear()
    records.watch(later)  # the timer re-arms for a call started after the sweep
    await asyncio.wait_for(journal.changed.wait(), WAIT)
    assert journal.written == [("slow", "running"), ("later", "running")]
