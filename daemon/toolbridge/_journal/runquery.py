"""Finding runs among many (the web view's search, filters and pages), a tool's calls, and
cancelling a run.

The SQL is written once for both dialects, as :class:`~.statements.Statement` text (``?``
for a parameter, ``{now}`` for the clock leases run on). Pages are
keyset pages: the next page starts after the last run shown, ``(started_at, run_id)``
descending, so the thousandth page costs what the first does (an ``OFFSET`` would read every
run before it). The indexes that keep a page cheap at 100,000 runs are in
:data:`RUN_SEARCH_MIGRATION`.

A run's status as a person sees it is partly derived (``waiting``: open on a pending
request; ``interrupted``: its holder's lease ran out; ``cancelled``: failed because a person
cancelled it), and each filter says the same as the view shows (``_ui.view.as_shown``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from toolbridge._journal import rows as r
from toolbridge._journal.statements import Statement

__all__ = [
    "CANCELLATIONS_SQL",
    "CANCEL_REQUESTS",
    "CANCEL_RUN",
    "RECORD_CANCEL",
    "RUN_SEARCH_MIGRATION",
    "STATUSES",
    "TOOL_CALLS",
    "RunQuery",
    "ToolCall",
    "cancel_error",
    "find_runs",
    "tool_call_from_row",
]

STATUSES = ("running", "waiting", "interrupted", "completed", "failed", "cancelled")
"""What a run can be shown as, and filtered by."""

RUN_SEARCH_MIGRATION: tuple[str, ...] = (
    # Newest first with a tie-break on the id: the keyset order of every page.
    "CREATE INDEX runs_by_start_id ON runs (started_at, run_id)",
    # A tool's calls, newest first (the per-tool page, and runs that called a tool).
    "CREATE INDEX steps_by_tool ON steps (name, started_at) WHERE kind = 'tool'",
    # Who cancelled a run, through what, when and why; the fence the cancel took marks the
    # entry of the run it ended (a later entry of the run is not cancelled).
    """CREATE TABLE run_cancellations (
        run_id       TEXT NOT NULL,
        fence        BIGINT NOT NULL,
        cancelled_by TEXT NOT NULL,
        channel      TEXT NOT NULL,
        reason       TEXT,
        cancelled_at BIGINT NOT NULL,
        PRIMARY KEY (run_id, fence)
    )""",
)
"""One numbered migration, the same on both dialects."""

CANCELLATIONS_SQL = (
    "EXISTS (SELECT 1 FROM run_cancellations c WHERE c.run_id = r.run_id AND c.fence = r.fence)"
)

_PENDING = "EXISTS (SELECT 1 FROM approvals a WHERE a.run_id = r.run_id AND a.state = 'pending')"
_LIVE = "(r.lease_expires_at IS NULL OR r.lease_expires_at >= {now})"  # by the lease clock


@dataclasses.dataclass(frozen=True)
class RunQuery:
    """Which runs to list, newest first.

    Attributes:
        search: Runs whose id contains this text.
        status: One of :data:`STATUSES`.
        tool: Runs that called this tool.
        since: Runs started at or after this time (seconds since the epoch).
        until: Runs started before this time.
        after: The page after this run: the ``(started_at, run_id)`` of the last one shown.
        limit: At most this many runs.
    """

    search: str | None = None
    status: str | None = None
    tool: str | None = None
    since: float | None = None
    until: float | None = None
    after: tuple[float, str] | None = None
    limit: int = 50


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """One call of a tool, as the per-tool page shows it."""

    run_id: str
    step_key: str
    status: str
    started_at: float
    finished_at: float | None
    error: dict[str, Any] | None


def _escape_like(text: str) -> str:
    return text.replace("!", "!!").replace("%", "!%").replace("_", "!_")


_STATUS_SQL = {
    "running": f"r.status = 'running' AND {_LIVE} AND NOT {_PENDING}",
    "waiting": f"r.status = 'running' AND {_LIVE} AND {_PENDING}",
    "interrupted": f"r.status = 'running' AND NOT {_LIVE}",
    "completed": "r.status = 'completed'",
    "failed": f"r.status = 'failed' AND NOT {CANCELLATIONS_SQL}",
    "cancelled": f"r.status = 'failed' AND {CANCELLATIONS_SQL}",
}


def find_runs(query: RunQuery, *, like: str = "LIKE") -> tuple[Statement, list[Any]]:
    """The statement that lists ``query``'s runs (``rows.RUN_COLUMNS``) and its parameters.

    Args:
        like: The operator that matches the search case-insensitively where the dialect
            has one (``ILIKE`` on PostgreSQL; SQLite's ``LIKE`` already is, for ASCII).
    """
    where: list[str] = []
    params: list[Any] = []
    if query.search:
        where.append(f"r.run_id {like} ? ESCAPE '!'")
        params.append("%" + _escape_like(query.search) + "%")
    if query.status:
        if query.status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}")
        where.append(_STATUS_SQL[query.status])
    if query.tool:
        where.append("r.run_id IN (SELECT s.run_id FROM steps s WHERE s.kind = 'tool' AND s.name = ?)")
        params.append(query.tool)
    if query.since is not None:
        where.append("r.started_at >= ?")
        params.append(r.to_ms(query.since))
    if query.until is not None:
        where.append("r.started_at < ?")
        params.append(r.to_ms(query.until))
    if query.after is not None:
        # A row comparison, which both dialects answer from the (started_at, run_id) index.
        where.append("(r.started_at, r.run_id) < (?, ?)")
        params += [r.to_ms(query.after[0]), query.after[1]]
    clause = f"WHERE {' AND '.join(where)} " if where else ""
    params.append(query.limit)
    sql = f"SELECT {r.RUN_COLUMNS} FROM runs r {clause}ORDER BY r.started_at DESC, r.run_id DESC LIMIT ?"
    return Statement(sql), params


TOOL_CALLS = Statement(
    "SELECT run_id, step_key, status, started_at, finished_at, error_json FROM steps "
    "WHERE kind = 'tool' AND name = ? ORDER BY started_at DESC LIMIT ?"
)
"""A tool's latest calls, newest first (``steps_by_tool``)."""


def tool_call_from_row(row: Sequence[Any]) -> ToolCall:
    return ToolCall(
        run_id=row[0],
        step_key=row[1],
        status=row[2],
        started_at=row[3] / 1000,
        finished_at=r.to_seconds(row[4]),
        error=json.loads(row[5]) if row[5] else None,
    )


def cancel_error(by: str, channel: str, reason: str | None) -> str:
    """What a cancelled run's error says: who, through what, and why."""
    return f"cancelled by {by} via {channel}" + (f": {reason}" if reason else "")


# A cancel is three writes in one transaction. It ends the run and takes its lease from
# whoever holds it: the fence goes up, so the holder's next renewal or write finds the run
# lost and stops its commands (``RunState.on_lost``); the lease is left free, so entering
# the run again replays it. Then who cancelled it is recorded, and its pending requests
# are cancelled.
CANCEL_RUN = Statement("""UPDATE runs SET status = 'failed', updated_at = {now}, finished_at = {now},
    error = ?, owner = ?, fence = fence + 1, lease_expires_at = NULL
    WHERE run_id = ? AND status = 'running' RETURNING fence""")
RECORD_CANCEL = Statement("""INSERT INTO run_cancellations
    (run_id, fence, cancelled_by, channel, reason, cancelled_at) VALUES (?, ?, ?, ?, ?, {now})""")
CANCEL_REQUESTS = Statement("""UPDATE approvals SET state = 'cancelled', decided_at = {now},
    decided_by = ?, channel = ?, reason = ? WHERE run_id = ? AND state = 'pending'""")
