"""Entering and leaving runs: the one place a bridge opens a run and closes it.

A bridge holds one :class:`RunState` per open run id, shared by every entry of that run
(``bridge.run``, ``Bridge.call_tool``, a sidecar token's calls), so that two entries asking
for the same step at once run it once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from toolbridge._durable.runstate import RunState
from toolbridge._journal.sqlite import Journal
from toolbridge._records import RunStatus

__all__ = ["Runs"]


class Runs:
    """The runs a bridge holds open.

    Args:
        journal: Where runs are recorded.
        background: Tool calls that outlive their askers; the bridge cancels them on close.
    """

    def __init__(self, journal: Journal, background: set[asyncio.Future[Any]]) -> None:
        self._journal = journal
        self._background = background
        self._open: dict[str, RunState] = {}

    def get(self, run_id: str) -> RunState | None:
        """The open run ``run_id``, if an entry holds it."""
        return self._open.get(run_id)

    async def enter(self, run_id: str) -> RunState:
        """Enter ``run_id`` (recording it as running) and return its shared state."""
        state = self._open.get(run_id)
        if state is None:
            recorded = await self._journal.enter_run(run_id)
            state = self._open.setdefault(run_id, RunState(run_id, recorded, self._journal, self._background))
        else:
            await self._journal.enter_run(run_id)
        state.entries += 1
        return state

    async def leave(
        self, state: RunState, status: RunStatus | None, error: str | None = None, *, suspend: bool = False
    ) -> None:
        """Leave a run entered with :meth:`enter`.

        With a ``status``, the run is recorded as ending so now; with ``None``, it is
        recorded as completed only when its last entry leaves. With ``suspend``, it stays
        recorded as running (it waits for a person; a later entry resumes it).
        """
        try:
            if status is not None:
                await self._journal.end_run(state.run_id, status, error)
        finally:
            state.entries -= 1
            if state.entries == 0:
                self._open.pop(state.run_id, None)
                if status is None and not suspend:
                    await self._journal.end_run(state.run_id, "completed")
