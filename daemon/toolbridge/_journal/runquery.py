"""Finding runs among many (the web view's search, filters and pages) and a tool's calls.

The SQL is written once for both dialects; each passes its placeholder style. Pages are
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
from collections.abc import Callable, Sequence
from typing import Any

from toolbridge._journal import rows as r

__all__ = [
    "CANCELLATIONS_SQL",
    "RUN_SEARCH_MIGRATION",
    "STATUSES",
    "RunQuery",
    "ToolCall",
    "cancel_error",
    "cancel_statements",
    "find_runs_sql",
    "tool_call_from_row",
    "tool_calls_sql",
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
_LIVE = "(r.lease_expires_at IS NULL OR r.lease_expires_at >= {now})"


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


def _status_sql(status: str, now: str) -> str:
    live = _LIVE.format(now=now)
    return {
        "running": f"r.status = 'running' AND {live} AND NOT {_PENDING}",
        "waiting": f"r.status = 'running' AND {live} AND {_PENDING}",
        "interrupted": f"r.status = 'running' AND NOT {live}",
        "completed": "r.status = 'completed'",
        "failed": f"r.status = 'failed' AND NOT {CANCELLATIONS_SQL}",
        "cancelled": f"r.status = 'failed' AND {CANCELLATIONS_SQL}",
    }[status]


def find_runs_sql(
    query: RunQuery, *, placeholder: Callable[[int], str], like: str = "LIKE", now_ms: int
) -> tuple[str, list[Any]]:
    """The statement that lists ``query``'s runs (``r.RUN_COLUMNS``) and its parameters.

    Args:
        placeholder: The dialect's n-th placeholder (``?`` or ``$n``).
        like: The operator that matches the search case-insensitively where the dialect has one.
        now_ms: Now, in the journal's milliseconds (a lease that ran out is ``interrupted``).
    """
    params: list[Any] = []

    def bind(value: Any) -> str:
        params.append(value)
        return placeholder(len(params))

    where: list[str] = []
    if query.search:
        where.append(f"r.run_id {like} {bind('%' + _escape_like(query.search) + '%')} ESCAPE '!'")
    if query.status:
        if query.status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}")
        # Only the statuses that depend on a lease's end take now (an unused parameter has no
        # type PostgreSQL can infer).
        leased = query.status in ("running", "waiting", "interrupted")
        where.append(_status_sql(query.status, bind(now_ms) if leased else ""))
    if query.tool:
        tool = bind(query.tool)
        where.append(f"r.run_id IN (SELECT s.run_id FROM steps s WHERE s.kind = 'tool' AND s.name = {tool})")
    if query.since is not None:
        where.append(f"r.started_at >= {bind(r.to_ms(query.since))}")
    if query.until is not None:
        where.append(f"r.started_at < {bind(r.to_ms(query.until))}")
    if query.after is not None:
        started, run_id = query.after
        at = bind(r.to_ms(started))
        # A row comparison, which both dialects answer from the (started_at, run_id) index.
        where.append(f"(r.started_at, r.run_id) < ({at}, {bind(run_id)})")
    clause = f"WHERE {' AND '.join(where)} " if where else ""
    sql = (
        f"SELECT {r.RUN_COLUMNS} FROM runs r {clause}"
        f"ORDER BY r.started_at DESC, r.run_id DESC LIMIT {bind(query.limit)}"
    )
    return sql, params


def tool_calls_sql(tool: str, limit: int, *, placeholder: Callable[[int], str]) -> tuple[str, list[Any]]:
    """The statement that lists ``tool``'s latest ``limit`` calls, newest first."""
    return (
        "SELECT run_id, step_key, status, started_at, finished_at, error_json FROM steps "
        f"WHERE kind = 'tool' AND name = {placeholder(1)} ORDER BY started_at DESC LIMIT {placeholder(2)}",
        [tool, limit],
    )


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


def cancel_statements(placeholder: Callable[[int], str]) -> tuple[str, str, str]:
    """The three writes of a cancel, in one transaction: end the run and take its lease from
    whoever holds it (the fence goes up, so the holder's next renewal or write finds it lost
    and stops the run's commands), record who cancelled it, and cancel its pending requests.

    Parameters, in order: (now, error, owner, run_id) -> the new fence; (run_id, fence, by,
    channel, reason, now); (now, by, channel, reason, run_id).
    """
    p = placeholder
    end = (
        f"UPDATE runs SET status = 'failed', updated_at = {p(1)}, finished_at = {p(1)}, error = {p(2)}, "
        f"owner = {p(3)}, fence = fence + 1, lease_expires_at = NULL "
        f"WHERE run_id = {p(4)} AND status = 'running' RETURNING fence"
    )
    record = (
        "INSERT INTO run_cancellations (run_id, fence, cancelled_by, channel, reason, cancelled_at) "
        f"VALUES ({p(1)}, {p(2)}, {p(3)}, {p(4)}, {p(5)}, {p(6)})"
    )
    requests = (
        f"UPDATE approvals SET state = 'cancelled', decided_at = {p(1)}, decided_by = {p(2)}, "
        f"channel = {p(3)}, reason = {p(4)} WHERE run_id = {p(5)} AND state = 'pending'"
    )
    return end, record, requests
