"""Reading a run's steps a page at a time, or one step as last written: shared by both dialects.

A long run (a million calls) is never read whole: the daemon keeps a bounded part of it in
memory and asks the journal for the rest, one key or one page at a time, through the
``(run_id, seq)`` and ``(run_id, parent_key, seq)`` indexes.

A step read by its key reads back as this journal last wrote it: a write still queued for
the next batch (or in the batch committing now) is answered from the queue, so a record the
daemon let go of a moment ago never reads back older than it was.

The SQL is written once, as :class:`~.statements.Statement` objects each dialect renders.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from toolbridge._journal import rows as r
from toolbridge._journal.commit import GroupCommit
from toolbridge._journal.statements import STEP, Dialect, Statement
from toolbridge._records import StepRecord

__all__ = ["STEP_PAGES_MIGRATION", "StepReads"]

STEP_PAGES_MIGRATION = (
    "CREATE INDEX steps_by_seq ON steps (run_id, seq, step_key)",
    "DROP INDEX steps_by_parent",
    "CREATE INDEX steps_by_parent ON steps (run_id, parent_key, seq)",
)
"""The indexes these reads use; the same statements in both dialects."""


_STEPS = f"SELECT {r.STEP_COLUMNS} FROM steps WHERE run_id = ?"
_LOAD_STEPS = {
    (False, False): Statement(f"{_STEPS} ORDER BY seq"),
    (True, False): Statement(f"{_STEPS} AND seq > ? ORDER BY seq"),
    (False, True): Statement(f"{_STEPS} ORDER BY seq LIMIT ?"),
    (True, True): Statement(f"{_STEPS} AND seq > ? ORDER BY seq LIMIT ?"),
}  # by (after given, limit given)
_STEP = Statement(f"{_STEPS} AND step_key = ?")
_STEP_KEYS = Statement("SELECT seq, step_key FROM steps WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?")
# Two forms: PostgreSQL uses no index for IS NOT DISTINCT FROM.
_CHILDREN = (
    "SELECT seq, step_key FROM steps WHERE run_id = ? AND {parent} AND seq > ? AND seq <= ? AND stale = 0 "
    "ORDER BY seq LIMIT ?"
)
_TOP_KEYS = Statement(_CHILDREN.format(parent="parent_key IS NULL"))
_CHILD_KEYS = Statement(_CHILDREN.format(parent="parent_key = ?"))


class StepReads:
    """The step reads of a journal; a journal class inherits them and supplies :meth:`_rows`."""

    dialect: ClassVar[Dialect]
    _commits: GroupCommit | None  # the journal's group commit while open: queued writes

    async def _rows(self, sql: str, params: tuple[Any, ...]) -> Sequence[Sequence[Any]]:
        """Run one read statement on the journal's read connection; return its rows."""
        raise NotImplementedError

    async def _select(
        self, statement: Statement, *params: Any, now: int | None = None
    ) -> list[Sequence[Any]]:
        """Run ``statement`` (as this journal's dialect spells it) with ``params``; its rows."""
        return list(await self._rows(statement.sql(self.dialect), statement.bind(self.dialect, params, now)))

    async def load_steps(
        self, run_id: str, *, after: int | None = None, limit: int | None = None
    ) -> list[StepRecord]:
        if limit == 0:
            return []
        params = (run_id, *(() if after is None else (after,)), *(() if limit is None else (limit,)))
        found = await self._select(_LOAD_STEPS[after is not None, limit is not None], *params)
        return [r.step_from_row(row) for row in found]

    async def load_step(self, run_id: str, key: str) -> StepRecord | None:
        queued = None if self._commits is None else self._commits.latest(STEP, (run_id, key))
        if queued is not None:
            return r.step_from_row(queued)
        found = await self._select(_STEP, run_id, key)
        return r.step_from_row(found[0]) if found else None

    async def step_keys(self, run_id: str, *, after: int = 0, limit: int) -> list[tuple[int, str]]:
        return [(row[0], row[1]) for row in await self._select(_STEP_KEYS, run_id, after, limit)]

    async def child_keys(
        self, run_id: str, parent_key: str | None, *, after: int = 0, through: int, limit: int
    ) -> list[tuple[int, str]]:
        if parent_key is None:
            found = await self._select(_TOP_KEYS, run_id, after, through, limit)
        else:
            found = await self._select(_CHILD_KEYS, run_id, parent_key, after, through, limit)
        return [(row[0], row[1]) for row in found]
