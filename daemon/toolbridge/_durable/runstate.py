"""A run's memory while it executes: its recorded steps, keys, and calls in flight."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from toolbridge._durable.startrecords import StartRecords
from toolbridge._errors import RunLeaseLostError
from toolbridge._journal.base import Journal
from toolbridge._json import digest
from toolbridge._records import StepRecord

T = TypeVar("T")


class RunState:
    """The recorded steps of one run, preloaded so that replay never waits on the disk.

    One ``RunState`` is shared by every live entry of the same run id in a bridge, so two
    calls with the same step key at the same time run once (single flight).
    """

    def __init__(
        self,
        run_id: str,
        recorded: list[StepRecord],
        journal: Journal,
        background: set[asyncio.Future[Any]] | None = None,
    ) -> None:
        self.run_id = run_id
        self.journal = journal
        self.start_records = StartRecords(journal)  # calls journaled as running once slow
        # Shielded work outlives its askers; the bridge cancels what is left when it closes.
        self._background = background if background is not None else set()
        self.steps: dict[str, StepRecord] = {rec.key: rec for rec in recorded}
        self.entries = 0
        self._inflight: dict[str, asyncio.Future[Any]] = {}
        self._seq = itertools.count(max((rec.seq for rec in recorded), default=0) + 1)
        # Keys asked for since the run was entered, and parents that ran their body again:
        # recorded children of a re-run parent that nobody asked for are marked stale.
        self.claimed: set[str] = set()
        self.executed_parents: set[str | None] = {None}
        # Set once another daemon took the run over (see Runs): nothing more runs here, and
        # the run's commands are stopped.
        self.lost: RunLeaseLostError | None = None
        self._on_lost: list[Callable[[RunLeaseLostError], None]] = []
        # When this bridge's hold on the run runs out unless renewed (monotonic seconds), and
        # how to renew it: new work that would start past it first makes sure the run is
        # still ours, so a daemon that was paused does not start steps it no longer owns.
        self.lease_deadline = math.inf
        self.renew: Callable[[], Awaitable[bool]] | None = None

    def on_lost(self, callback: Callable[[RunLeaseLostError], None]) -> Callable[[], None]:
        """Call ``callback`` if the run is taken over; returns a function that cancels that."""
        self._on_lost.append(callback)
        return lambda: self._on_lost.remove(callback) if callback in self._on_lost else None

    def lose(self, error: RunLeaseLostError) -> None:
        """Note that another daemon took the run over, and tell whoever asked."""
        if self.lost is None:
            self.lost = error
            for callback in list(self._on_lost):
                callback(error)

    async def check_lease(self) -> None:
        """Raise :class:`RunLeaseLostError` unless the run is still this bridge's to run."""
        if self.lost is None and self.renew is not None and time.monotonic() >= self.lease_deadline:
            await self.renew()
        if self.lost is not None:
            raise RunLeaseLostError(self.run_id, self.lost.owner)

    def idempotency_key(self, step_key: str) -> str:
        """Stable for a step across attempts, replays and daemon restarts."""
        return "tbk_" + digest(f"{self.run_id}\0{step_key}", 32)

    def claim(self, key: str) -> StepRecord | None:
        """Note that ``key`` was asked for, and return its record if there is one."""
        self.claimed.add(key)
        rec = self.steps.get(key)
        if rec is not None and rec.stale:
            rec.stale = False
            self.journal.write(rec)
        return rec

    def new_step(
        self, key: str, *, parent_key: str | None, kind: str, name: str, input_json: str | None
    ) -> StepRecord:
        rec = StepRecord(
            run_id=self.run_id,
            key=key,
            parent_key=parent_key,
            seq=next(self._seq),
            kind=kind,
            name=name,
            idempotency_key=self.idempotency_key(key),
            input_json=input_json,
        )
        self.steps[key] = rec
        return rec

    async def single_flight(
        self, key: str, work: Callable[[], Awaitable[T]], *, shield: bool, detached: bool = False
    ) -> T:
        """Run ``work`` once for ``key``; concurrent askers share its outcome.

        With ``shield``, the work finishes (and is recorded) even when every asker is
        cancelled, as a tool call must once it has started: it runs in a task of its own.
        ``detached`` says the asking task is itself never cancelled by whoever asked (a
        stream's task per call outlives the stream), so the work runs in it, with no task
        and no shield: two turns of the event loop fewer. Shutdown still sees it, and may
        cancel it once its grace is over, as it would the task.
        """
        existing = self._inflight.get(key)
        if existing is not None:
            return await asyncio.shield(existing)
        await self.check_lease()
        existing = self._inflight.get(key)  # another asker started it while we checked
        if existing is not None:
            return await asyncio.shield(existing)
        if shield and detached:
            return await self._run_here(key, work)
        task: asyncio.Future[T] = asyncio.ensure_future(work())
        self._inflight[key] = task
        task.add_done_callback(lambda _: self._inflight.pop(key, None))
        if shield:
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return await (asyncio.shield(task) if shield else task)

    async def _run_here(self, key: str, work: Callable[[], Awaitable[T]]) -> T:
        shared: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        shared.add_done_callback(_consume_exception)  # nobody else may have asked
        self._inflight[key] = shared
        task = asyncio.current_task()
        assert task is not None
        self._background.add(task)
        try:
            value = await work()
        except asyncio.CancelledError:
            shared.cancel()
            raise
        except BaseException as exc:
            shared.set_exception(exc)
            raise
        else:
            shared.set_result(value)
            return value
        finally:
            self._inflight.pop(key, None)
            self._background.discard(task)

    def mark_stale(self, parent_key: str | None) -> list[str]:
        """Mark recorded children of ``parent_key`` that this execution did not ask for.

        Returns:
            Their keys, in the order they were first recorded.
        """
        marked = []
        for rec in sorted(self.steps.values(), key=lambda rec: rec.seq):
            if rec.parent_key == parent_key and rec.key not in self.claimed and not rec.stale:
                rec.stale = True
                self.journal.write(rec)
                marked.append(rec.key)
        return marked


def _consume_exception(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class KeyCounter:
    """Gives repeated ids distinct keys: ``agent``, ``agent#2``, ``agent#3``..."""

    def __init__(self) -> None:
        self._seen: Counter[str] = Counter()

    def key(self, base: str) -> str:
        self._seen[base] += 1
        count = self._seen[base]
        return base if count == 1 else f"{base}#{count}"
