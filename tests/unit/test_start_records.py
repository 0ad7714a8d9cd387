"""Slow calls are journaled as running, by one timer per run; fast ones only with their outcome."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolbridge._durable.startrecords import START_RECORD_DELAY, SWEEP_SLACK, StartRecords
from toolbridge._records import StepRecord

WAIT = 5.0


class RecordingJournal:
    """Only what StartRecords uses of a journal: ``write_soon``, noting what it was given."""

    def __init__(self) -> None:
        self.written: list[tuple[str, str]] = []
        self.changed = asyncio.Event()

    def write_soon(self, rec: StepRecord) -> None:
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


async def test_calls_started_one_after_another_share_a_few_sweeps_not_one_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    journal = RecordingJournal()
    records = StartRecords(journal)  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    armed: list[float] = []
    call_at = loop.call_at

    def counting_call_at(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        if callback == records._sweep:  # not the test's own sleeps
            armed.append(when)
        return call_at(when, callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", counting_call_at)
    slow = [step(f"s{number}") for number in range(30)]
    for rec in slow:  # a busy run: a call starting every millisecond, all of them slow
        records.watch(rec)
        await asyncio.sleep(0.001)  # spreads the calls' start times; waits for no outcome
    while len(journal.written) < len(slow):
        journal.changed.clear()
        await asyncio.wait_for(journal.changed.wait(), WAIT)
    assert journal.written == [(rec.key, "running") for rec in slow]
    # One timer per sweep, a sweep at most every SWEEP_SLACK: not one per call.
    assert len(armed) <= 2 + (len(slow) * 0.001 + START_RECORD_DELAY) / SWEEP_SLACK, armed
