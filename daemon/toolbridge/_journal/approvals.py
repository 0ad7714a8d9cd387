"""Requests for a person's decision: the ``approvals`` table, its SQL and its rows.

A request is bound to the call that waits on it: its run, its step key and a hash of the
validated arguments. A decision is a compare-and-swap in the database (``UPDATE ... WHERE
state = 'pending' RETURNING``), so that of two deciders, in one process or two, exactly one
wins and the other learns who did. Writes go through the journal's group commit, as all of
its writes do; requests are not fenced by the run's lease: a person decides while no host
holds the run. Times are stored as integer epoch milliseconds and shown in
seconds, as every other time toolbridge returns.

:class:`SQLApprovals` is the real store (both dialects); :class:`MemoryApprovals` keeps requests in
memory for a bridge without a journal (``Bridge(journal=None)``) and for unit tests.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from toolbridge._journal.statements import APPROVAL, DECIDE, Statement, Write
from toolbridge._records import now

__all__ = [
    "APPROVALS_MIGRATION",
    "DECISIONS",
    "INSERT_REQUEST",
    "ApprovalRequest",
    "ApprovalStore",
    "MemoryApprovals",
    "RequestKind",
    "RequestState",
    "SQLApprovals",
]

RequestKind = Literal["approval", "input"]
RequestState = Literal["pending", "approved", "rejected", "expired", "cancelled"]
Condition = Literal["live", "overdue", "any"]
"""Which pending requests a transition applies to: not yet expired, past expiry, or any."""

APPROVALS_MIGRATION: tuple[str, ...] = (
    """CREATE TABLE approvals (
        request_id         TEXT PRIMARY KEY,
        run_id             TEXT NOT NULL,
        step_key           TEXT NOT NULL,
        args_hash          TEXT NOT NULL,
        kind               TEXT NOT NULL CHECK (kind IN ('approval', 'input')),
        tool_name          TEXT NOT NULL,
        arguments_json     TEXT NOT NULL,
        summary            TEXT NOT NULL,
        answer_schema_json TEXT,
        state              TEXT NOT NULL
            CHECK (state IN ('pending', 'approved', 'rejected', 'expired', 'cancelled')),
        created_at         INTEGER NOT NULL,
        expires_at         INTEGER NOT NULL,
        decided_at         INTEGER,
        decided_by         TEXT,
        channel            TEXT,
        reason             TEXT,
        answer_json        TEXT
    )""",
    "CREATE UNIQUE INDEX approvals_by_call ON approvals (run_id, step_key, args_hash) "
    "WHERE state != 'cancelled'",
    "CREATE INDEX approvals_by_state ON approvals (state, created_at)",
)
"""The migration that adds the table (one of the journal's numbered migrations)."""

_COLUMNS = (
    "request_id, run_id, step_key, args_hash, kind, tool_name, arguments_json, summary, "
    "answer_schema_json, state, created_at, expires_at, decided_at, decided_by, channel, reason, "
    "answer_json"
)


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


def _s(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000


@dataclass(frozen=True)
class ApprovalRequest:
    """A call waiting on a person, and what they decided.

    Attributes:
        id: Names the request (``apr_...``), for deciding it.
        run_id: The run of the call that waits.
        step_key: The call's step in that run.
        args_hash: A hash of the validated arguments the decision applies to.
        kind: ``"approval"`` (approve or reject a call) or ``"input"`` (answer a question).
        tool: The tool that was called.
        arguments: The validated arguments, as the approver is shown them.
        summary: One line for a person: the call, the action, or the question.
        answer_schema: For ``"input"``: the JSON Schema an answer must match.
        state: ``pending``, ``approved``, ``rejected``, ``expired`` or ``cancelled``.
        created_at: When it was asked (seconds since the epoch).
        expires_at: When it expires unless decided.
        decided_at: When it was decided (or expired).
        decided_by: Who decided it.
        channel: Through what: ``"api"`` (host code), ``"cli"``, ``"web"``, ``"mcp"``,
            ``"timeout"`` (expiry).
        reason: Why, as the decider said.
        answer: For ``"input"``: the answer given.
    """

    id: str
    run_id: str
    step_key: str
    args_hash: str
    kind: RequestKind
    tool: str
    arguments: Any
    summary: str
    state: RequestState
    created_at: float
    expires_at: float
    answer_schema: dict[str, Any] | None = None
    decided_at: float | None = None
    decided_by: str | None = None
    channel: str | None = None
    reason: str | None = None
    answer: Any = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def decided(
        self,
        state: RequestState,
        *,
        by: str | None,
        channel: str,
        reason: str | None = None,
        answer: Any = None,
        at: float | None = None,
    ) -> ApprovalRequest:
        """This request as it is once decided so."""
        return dataclasses.replace(
            self,
            state=state,
            decided_by=by,
            channel=channel,
            reason=reason,
            answer=answer,
            decided_at=now() if at is None else at,
        )


def _row(req: ApprovalRequest) -> tuple[Any, ...]:
    return (
        req.id,
        req.run_id,
        req.step_key,
        req.args_hash,
        req.kind,
        req.tool,
        json.dumps(req.arguments),
        req.summary,
        None if req.answer_schema is None else json.dumps(req.answer_schema),
        req.state,
        _ms(req.created_at),
        _ms(req.expires_at),
        _ms(req.decided_at),
        req.decided_by,
        req.channel,
        req.reason,
        None if req.answer is None else json.dumps(req.answer),
    )


def _from_row(row: Sequence[Any]) -> ApprovalRequest:
    return ApprovalRequest(
        id=row[0],
        run_id=row[1],
        step_key=row[2],
        args_hash=row[3],
        kind=row[4],
        tool=row[5],
        arguments=json.loads(row[6]),
        summary=row[7],
        answer_schema=None if row[8] is None else json.loads(row[8]),
        state=row[9],
        created_at=row[10] / 1000,
        expires_at=row[11] / 1000,
        decided_at=_s(row[12]),
        decided_by=row[13],
        channel=row[14],
        reason=row[15],
        answer=None if row[16] is None else json.loads(row[16]),
    )


class ApprovalStore(Protocol):
    """Where requests are kept. Every method returns once the change is committed."""

    async def create(self, req: ApprovalRequest) -> ApprovalRequest:
        """Record ``req``, unless its call (run, step, arguments) already has a request that
        is not cancelled: return the one kept."""
        ...

    async def get(self, request_id: str) -> ApprovalRequest | None: ...

    async def for_step(self, run_id: str, step_key: str) -> list[ApprovalRequest]:
        """The step's requests that are not cancelled (one per set of arguments)."""
        ...

    async def list(
        self, *, run_id: str | None = None, states: Sequence[RequestState] | None = None
    ) -> list[ApprovalRequest]:
        """Requests, oldest first, of one run or all, in the given states or any."""
        ...

    async def decide(self, decided: ApprovalRequest, *, condition: Condition) -> bool:
        """Move a pending request to ``decided``'s state and details, if it still is pending
        (and, by ``condition``, not yet expired or already past expiry). Returns whether it won.
        """
        ...


INSERT_REQUEST = Statement(
    f"INSERT INTO approvals ({_COLUMNS}) VALUES ({', '.join('?' * 17)}) "
    "ON CONFLICT (run_id, step_key, args_hash) WHERE state != 'cancelled' DO NOTHING"
)
_DECIDE = (
    "UPDATE approvals SET state = ?, decided_at = ?, decided_by = ?, channel = ?, reason = ?, "
    "answer_json = ? WHERE request_id = ? AND state = 'pending'"
)
DECISIONS: dict[Condition, Statement] = {
    "live": Statement(f"{_DECIDE} AND expires_at > ? RETURNING request_id"),
    "overdue": Statement(f"{_DECIDE} AND expires_at <= ? RETURNING request_id"),
    "any": Statement(f"{_DECIDE} RETURNING request_id"),
}
"""A decision, by which pending requests it applies to (its guard on the expiry)."""

Select = Callable[..., Awaitable[list[Sequence[Any]]]]
"""Runs a read :class:`Statement` with its parameters on the journal; returns the rows."""
Queue = Callable[[Write, Any, Any], "asyncio.Future[Any]"]


class SQLApprovals:
    """The requests in the journal's database; writes through its group commit."""

    def __init__(self, select: Select, queue: Queue) -> None:
        self._select = select
        self._queue = queue

    async def _fetch(self, where: str, *params: Any) -> list[ApprovalRequest]:
        found = await self._select(Statement(f"SELECT {_COLUMNS} FROM approvals {where}"), *params)
        return [_from_row(row) for row in found]

    async def create(self, req: ApprovalRequest) -> ApprovalRequest:
        await self._queue(APPROVAL, None, _row(req))
        kept = await self.for_step(req.run_id, req.step_key)
        return next(found for found in kept if found.args_hash == req.args_hash)

    async def get(self, request_id: str) -> ApprovalRequest | None:
        found = await self._fetch("WHERE request_id = ?", request_id)
        return found[0] if found else None

    async def for_step(self, run_id: str, step_key: str) -> list[ApprovalRequest]:
        return await self._fetch(
            "WHERE run_id = ? AND step_key = ? AND state != 'cancelled' ORDER BY created_at", run_id, step_key
        )

    async def list(
        self, *, run_id: str | None = None, states: Sequence[RequestState] | None = None
    ) -> list[ApprovalRequest]:
        clauses, params = [], []
        if run_id is not None:
            clauses.append("run_id = ?")
            params.append(run_id)
        if states is not None:
            clauses.append(f"state IN ({', '.join('?' * len(states))})")
            params.extend(states)
        where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
        return await self._fetch(f"{where}ORDER BY created_at, request_id", *params)

    async def decide(self, decided: ApprovalRequest, *, condition: Condition) -> bool:
        params: tuple[Any, ...] = (
            decided.state,
            _ms(decided.decided_at),
            decided.decided_by,
            decided.channel,
            decided.reason,
            None if decided.answer is None else json.dumps(decided.answer),
            decided.id,
        )
        if condition != "any":
            params += (_ms(decided.decided_at),)
        won: bool = await self._queue(DECIDE, None, (condition, params))
        return won


class MemoryApprovals:
    """Requests in memory: for a bridge without a journal, and for unit tests."""

    def __init__(self) -> None:
        self._requests: dict[str, ApprovalRequest] = {}

    async def create(self, req: ApprovalRequest) -> ApprovalRequest:
        for kept in await self.for_step(req.run_id, req.step_key):
            if kept.args_hash == req.args_hash:
                return kept
        self._requests[req.id] = req
        return req

    async def get(self, request_id: str) -> ApprovalRequest | None:
        return self._requests.get(request_id)

    async def for_step(self, run_id: str, step_key: str) -> list[ApprovalRequest]:
        return [
            req
            for req in self._requests.values()
            if req.run_id == run_id and req.step_key == step_key and req.state != "cancelled"
        ]

    async def list(
        self, *, run_id: str | None = None, states: Sequence[RequestState] | None = None
    ) -> list[ApprovalRequest]:
        return sorted(
            (
                req
                for req in self._requests.values()
                if (run_id is None or req.run_id == run_id) and (states is None or req.state in states)
            ),
            key=lambda req: (req.created_at, req.id),
        )

    async def decide(self, decided: ApprovalRequest, *, condition: Condition) -> bool:
        current = self._requests.get(decided.id)
        if current is None or current.state != "pending":
            return False
        at = decided.decided_at or now()
        if (condition == "live" and current.expires_at <= at) or (
            condition == "overdue" and current.expires_at > at
        ):
            return False
        self._requests[decided.id] = decided
        return True
