"""A run's memory while it executes: its recorded steps, keys, and calls in flight."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

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

    async def single_flight(self, key: str, work: Callable[[], Awaitable[T]], *, shield: bool) -> T:
        """Run ``work`` once for ``key``; concurrent askers share its outcome.

        With ``shield``, the work finishes (and is recorded) even when every asker is
        cancelled, as a tool call must once it has started.
        """
        existing = self._inflight.get(key)
        if existing is not None:
            return await asyncio.shield(existing)
        task: asyncio.Future[T] = asyncio.ensure_future(work())
        self._inflight[key] = task
        task.add_done_callback(lambda _: self._inflight.pop(key, None))
        if shield:
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return await (asyncio.shield(task) if shield else task)

    def mark_stale(self, parent_key: str | None) -> None:
        """Mark recorded children of ``parent_key`` that this execution did not ask for."""
        for rec in self.steps.values():
            if rec.parent_key == parent_key and rec.key not in self.claimed and not rec.stale:
                rec.stale = True
                self.journal.write(rec)


class KeyCounter:
    """Gives repeated ids distinct keys: ``agent``, ``agent#2``, ``agent#3``..."""

    def __init__(self) -> None:
        self._seen: Counter[str] = Counter()

    def key(self, base: str) -> str:
        self._seen[base] += 1
        count = self._seen[base]
        return base if count == 1 else f"{base}#{count}"
