"""Reading a run's steps a page at a time, or one step as last written: shared by both dialects.

A long run (a million calls) is never read whole: the daemon keeps a bounded part of it in
memory and asks the journal for the rest, one key or one page at a time, through the
``(run_id, seq)`` and ``(run_id, parent_key, seq)`` indexes.

A step read by its key reads back as this journal last wrote it: a write still queued for
the next batch (or in the batch committing now) is answered from the queue, so a record the
daemon let go of a moment ago never reads back older than it was.

The SQL is written once with ``?`` placeholders; the PostgreSQL journal numbers them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from toolbridge._journal import rows as r
from toolbridge._journal.commit import GroupCommit
from toolbridge._records import StepRecord

__all__ = ["STEP_PAGES_MIGRATION", "StepReads"]

STEP_PAGES_MIGRATION = (
    "CREATE INDEX steps_by_seq ON steps (run_id, seq, step_key)",
    "DROP INDEX steps_by_parent",
    "CREATE INDEX steps_by_parent ON steps (run_id, parent_key, seq)",
)
"""The indexes these reads use; the same statements in both dialects."""


def numbered(sql: str) -> str:
    """``?`` placeholders as PostgreSQL's ``$1, $2, ...``."""
    count = iter(range(1, sql.count("?") + 1))
    return re.sub(r"\?", lambda _: f"${next(count)}", sql)


class StepReads:
    """The step reads of a journal; a journal class inherits them and supplies :meth:`_rows`."""

    _commits: GroupCommit | None  # the journal's group commit while open: queued writes
    _numbered_placeholders = False  # PostgreSQL's $1, $2, ... rather than ?

    async def _rows(self, sql: str, params: tuple[Any, ...]) -> Sequence[Sequence[Any]]:
        """Run one read statement on the journal's read connection; return its rows."""
        raise NotImplementedError

    async def _select(self, sql: str, *params: Any) -> Sequence[Sequence[Any]]:
        return await self._rows(numbered(sql) if self._numbered_placeholders else sql, params)

    async def load_steps(
        self, run_id: str, *, after: int | None = None, limit: int | None = None
    ) -> list[StepRecord]:
        if limit == 0:
            return []
        sql = f"SELECT {r.STEP_COLUMNS} FROM steps WHERE run_id = ?"
        params: tuple[Any, ...] = (run_id,)
        if after is not None:
            sql, params = f"{sql} AND seq > ?", (*params, after)
        sql = f"{sql} ORDER BY seq"
        if limit is not None:
            sql, params = f"{sql} LIMIT ?", (*params, limit)
        return [r.step_from_row(tuple(row)) for row in await self._select(sql, *params)]

    async def load_step(self, run_id: str, key: str) -> StepRecord | None:
        queued = None if self._commits is None else self._commits.latest("step", (run_id, key))
        if queued is not None:
            return r.step_from_row(queued)
        found = await self._select(
            f"SELECT {r.STEP_COLUMNS} FROM steps WHERE run_id = ? AND step_key = ?", run_id, key
        )
        return r.step_from_row(tuple(found[0])) if found else None

    async def step_keys(self, run_id: str, *, after: int = 0, limit: int) -> list[tuple[int, str]]:
        sql = "SELECT seq, step_key FROM steps WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"
        return [(row[0], row[1]) for row in await self._select(sql, run_id, after, limit)]

    async def child_keys(
        self, run_id: str, parent_key: str | None, *, after: int = 0, through: int, limit: int
    ) -> list[tuple[int, str]]:
        # Two forms: PostgreSQL uses no index for IS NOT DISTINCT FROM.
        parent = "parent_key IS NULL" if parent_key is None else "parent_key = ?"
        sql = (
            f"SELECT seq, step_key FROM steps WHERE run_id = ? AND {parent} AND seq > ? AND seq <= ? "
            "AND stale = 0 ORDER BY seq LIMIT ?"
        )
        params = (run_id, *(() if parent_key is None else (parent_key,)), after, through, limit)
        return [(row[0], row[1]) for row in await self._select(sql, *params)]
