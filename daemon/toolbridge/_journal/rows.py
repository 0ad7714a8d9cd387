"""Records to rows and back: where float seconds in memory become integer milliseconds on disk."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from toolbridge._records import RunSummary, SidecarToken, StepRecord

RUN_STATUS_SQL = (
    "CASE WHEN r.status = 'running' AND EXISTS (SELECT 1 FROM approvals a "
    "WHERE a.run_id = r.run_id AND a.state = 'pending') THEN 'waiting' "
    "WHEN r.status = 'failed' AND EXISTS (SELECT 1 FROM run_cancellations c "
    "WHERE c.run_id = r.run_id AND c.fence = r.fence) THEN 'cancelled' ELSE r.status END"
)
"""A run's status as listed: a run still open on a pending request is ``waiting``; one a
person cancelled (and nobody entered again since) is ``cancelled`` (see ``runquery.py``)."""

STEP_COLUMNS = (
    "run_id, step_key, parent_key, seq, kind, name, idempotency_key, status, input_json, "
    "output_json, error_json, attempts, attempt_log, started_at, finished_at, stale"
)
RUN_COLUMNS = (
    f"r.run_id, {RUN_STATUS_SQL}, r.started_at, r.updated_at, r.finished_at, r.entries, "
    "(SELECT COUNT(*) FROM steps s WHERE s.run_id = r.run_id), r.error, r.owner, "
    "r.lease_expires_at, r.fence"
)
TOKEN_COLUMNS = "token_id, run_id, tools_json, max_calls, calls, created_at, expires_at, revoked_at"


def to_ms(seconds: float) -> int:
    """Seconds since the epoch as the journal stores them: whole milliseconds."""
    return round(seconds * 1000)


def to_ms_or_none(seconds: float | None) -> int | None:
    return None if seconds is None else to_ms(seconds)


def to_seconds(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000


def step_row(rec: StepRecord) -> tuple[Any, ...]:
    return (
        rec.run_id,
        rec.key,
        rec.parent_key,
        rec.seq,
        rec.kind,
        rec.name,
        rec.idempotency_key,
        rec.status,
        rec.input_json,
        rec.output_json,
        None if rec.error is None else json.dumps(rec.error),
        rec.attempts,
        json.dumps(rec.attempt_log),
        to_ms(rec.started_at),
        to_ms_or_none(rec.finished_at),
        int(rec.stale),
    )


def step_from_row(row: Sequence[Any]) -> StepRecord:
    return StepRecord(
        run_id=row[0],
        key=row[1],
        parent_key=row[2],
        seq=row[3],
        kind=row[4],
        name=row[5],
        idempotency_key=row[6],
        status=row[7],
        input_json=row[8],
        output_json=row[9],
        error=None if row[10] is None else json.loads(row[10]),
        attempts=row[11],
        attempt_log=json.loads(row[12]),
        started_at=row[13] / 1000,
        finished_at=to_seconds(row[14]),
        stale=bool(row[15]),
    )


def run_from_row(row: Sequence[Any]) -> RunSummary:
    return RunSummary(
        run_id=row[0],
        status=row[1],
        started_at=row[2] / 1000,
        updated_at=row[3] / 1000,
        finished_at=to_seconds(row[4]),
        entries=row[5],
        steps=row[6],
        error=row[7],
        owner=row[8],
        lease_expires_at=to_seconds(row[9]),
        fence=row[10],
    )


def token_row(token: SidecarToken, secret_hash: bytes) -> tuple[Any, ...]:
    """A token as its row is inserted (columns as ``INSERT_TOKEN`` names them), times in ms."""
    return (
        token.id,
        token.run_id,
        json.dumps(list(token.tools)),
        token.max_calls,
        token.calls,
        to_ms(token.created_at),
        to_ms(token.expires_at),
        to_ms_or_none(token.revoked_at),
        secret_hash.hex(),
    )


def token_from_row(row: Sequence[Any]) -> SidecarToken:
    return SidecarToken(
        id=row[0],
        run_id=row[1],
        tools=tuple(json.loads(row[2])),
        max_calls=row[3],
        calls=row[4],
        created_at=row[5] / 1000,
        expires_at=row[6] / 1000,
        revoked_at=to_seconds(row[7]),
    )


def event_from_row(row: Sequence[Any]) -> dict[str, Any]:
    return {"id": row[0], "name": row[1], "data": json.loads(row[2]), "ts": row[3] / 1000}
