"""What both SQL journals do alike, written once: runs, leases, steps, events, tokens, requests.

As DBOS keeps its system database (``dbos/_sys_db.py`` with ``_sys_db_sqlite.py`` and
``_sys_db_postgres.py`` beside it), :class:`SQLJournal` holds every method whose SQL means
the same on both dialects, and the dialect packages (``sqlite/``, ``postgres/``) supply only
what differs: how a batch reaches the database (a thread of its own for SQLite, a pool for
PostgreSQL), the multi-row step upsert, how a batch locks the runs it fences, notices,
and whose clock the leases run on.

Every write goes through the group commit (:mod:`.commit`); each batch is one transaction.
A batch's operations are written once, as generators that yield :class:`Query` objects and
are sent back the rows: SQLite runs them in its writer's thread with blocking calls,
PostgreSQL on the event loop with awaits, and neither repeats them.

Runs are leased: a journal enters a run by taking its lease in the database, and every step
write is fenced by it, so a journal whose lease was taken over can no longer write the run.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Generator, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from toolbridge._errors import JournalError, RunBusyError, RunLeaseLostError
from toolbridge._journal import rows as r
from toolbridge._journal import runquery as rq
from toolbridge._journal import statements as s
from toolbridge._journal.approvals import DECISIONS, INSERT_REQUEST, SQLApprovals
from toolbridge._journal.commit import GroupCommit, Pending
from toolbridge._journal.fences import Fences
from toolbridge._journal.functions import SQLFunctions
from toolbridge._journal.holders import holder_gone, new_owner
from toolbridge._journal.statements import Statement, Write
from toolbridge._journal.stepreads import StepReads
from toolbridge._records import RunStatus, RunSummary, SidecarToken, StepRecord

__all__ = ["Durability", "Operation", "Query", "SQLJournal", "by_kind", "new_owner"]

log = logging.getLogger("toolbridge")

Durability = Literal["normal", "full"]
"""``"normal"`` survives a killed process, ``"full"`` a power loss (or a database crash) too."""

Rows = list[Sequence[Any]]
Fenced = dict[str, tuple[str | None, int]]
"""Run id -> its current owner and fence, as a batch reads them."""


def not_entered(run_id: str) -> JournalError:
    return JournalError(f"run {run_id!r} was not entered by this journal: enter it before writing to it")


@dataclass(frozen=True, slots=True)
class Query:
    """One statement of a batch, as the dialect runs it; the rows it returns are sent back."""

    sql: str
    params: Sequence[Any]
    many: bool = False  # ``params`` is a list of parameter rows, run with ``executemany``


Operation = Generator[Query, Rows, None]
"""A batch operation: yields its queries, receives each one's rows (``[]`` for ``many``)."""


def by_kind(batch: Sequence[Pending]) -> dict[Write, list[Pending]]:
    """A batch's writes grouped by kind, in the order each kind first appears."""
    grouped: dict[Write, list[Pending]] = {}
    for pending in batch:
        grouped.setdefault(pending.kind, []).append(pending)
    return grouped


class SQLJournal(StepReads):
    """The journal's methods and batch operations, over a dialect's hooks."""

    owner: str
    location: str | None
    approvals: SQLApprovals
    functions: SQLFunctions

    def _setup(self, owner: str | None) -> None:
        self.owner = owner or new_owner()
        self._commits: GroupCommit | None = None
        self._held = Fences()  # the fence of each run held, and of those left lately
        self.approvals = SQLApprovals(self._select, self._queue)
        self.functions = SQLFunctions(
            self._select, self._queue, self.owner, self._host_now, notify=self.dialect.name == "postgres"
        )

    # -- the dialect's hooks ---------------------------------------------------------------

    def _host_now(self) -> int | None:
        """Now in epoch ms where leases run on the host's clock; ``None`` on the database's."""
        return None

    def _fences(self, run_ids: set[str]) -> Generator[Query, Rows, Fenced]:
        """Each run's owner and fence, read in the batch (and kept from a takeover until it commits)."""
        raise NotImplementedError

    def _steps(self, writes: list[Pending]) -> Operation:
        """Write step snapshots, each only under the fence its journal took."""
        raise NotImplementedError

    def _notify(self, writes: list[Pending]) -> Operation:
        """Tell other daemons of the events ``writes`` record (when the batch commits)."""
        yield from ()

    # -- reading and queueing --------------------------------------------------------------

    def _queue(self, kind: Write, key: Hashable, params: Any) -> asyncio.Future[Any]:
        if self._commits is None:
            raise JournalError("the journal is not open")
        return self._commits.add(kind, key, params)

    # -- runs and steps --------------------------------------------------------------------

    async def enter_run(self, run_id: str, *, lease: float, limit: int | None = None) -> list[StepRecord]:
        await self._queue(s.ENTER, None, (run_id, self.owner, r.to_ms(lease), self._host_now()))
        return await self.load_steps(run_id, limit=limit)

    async def renew_run(self, run_id: str, *, lease: float) -> bool:
        renewed: bool = await self._queue(s.RENEW, run_id, (run_id, r.to_ms(lease), self._host_now()))
        return renewed

    async def release_run(self, run_id: str) -> None:
        await self._queue(s.RELEASE, run_id, run_id)

    def write(self, rec: StepRecord) -> asyncio.Future[None]:
        """Queue a snapshot of ``rec`` now; await the future: it resolves once committed.

        Raises:
            JournalError: at once, when the journal is not open. The future fails with
                :class:`RunLeaseLostError` when the run was taken over.
        """
        return self._queue(s.STEP, (rec.run_id, rec.key), r.step_row(rec))

    def write_soon(self, rec: StepRecord) -> None:
        """Queue a snapshot of ``rec`` and go on: it commits with the next batch.

        For a write the caller need not wait for (a later awaited write of the run commits
        after it, or fails for the same reason).
        """
        if self._commits is None:
            raise JournalError("the journal is not open")
        self._commits.add_soon(s.STEP, (rec.run_id, rec.key), r.step_row(rec))

    async def end_run(self, run_id: str, status: RunStatus, error: str | None = None) -> None:
        await self._queue(s.END, run_id, (run_id, status, error, self._host_now()))

    async def list_runs(self, limit: int = 50) -> list[RunSummary]:
        return [r.run_from_row(row) for row in await self._select(s.RUNS_NEWEST, limit)]

    async def get_run(self, run_id: str) -> RunSummary | None:
        found = await self._select(s.RUN_BY_ID, run_id)
        return r.run_from_row(found[0]) if found else None

    async def find_runs(self, query: rq.RunQuery) -> list[RunSummary]:
        like = "ILIKE" if self.dialect.name == "postgres" else "LIKE"
        statement, params = rq.find_runs(query, like=like)
        return [r.run_from_row(row) for row in await self._select(statement, *params, now=self._host_now())]

    async def tool_calls(self, tool: str, *, limit: int) -> list[rq.ToolCall]:
        return [rq.tool_call_from_row(row) for row in await self._select(rq.TOOL_CALLS, tool, limit)]

    async def cancel_run(self, run_id: str, *, by: str, channel: str, reason: str | None) -> bool:
        params = (run_id, by, channel, reason, self._host_now())
        cancelled: bool = await self._queue(s.CANCEL, None, params)  # never merged with another
        return cancelled

    async def orphaned_runs(self, limit: int = 100) -> list[RunSummary]:
        """Runs still ``running`` whose holder left or let its lease run out (by the lease clock)."""
        found = await self._select(s.RUNS_ORPHANED, limit, now=self._host_now())
        return [r.run_from_row(row) for row in found]

    # -- events ----------------------------------------------------------------------------

    async def record_event(self, event: dict[str, Any]) -> None:
        params = (event["id"], event["name"], json.dumps(event["data"]), r.to_ms(event["ts"]))
        await self._queue(s.EVENT, event["id"], params)

    async def events_since(self, name: str, since: float) -> list[dict[str, Any]]:
        return [r.event_from_row(row) for row in await self._select(s.EVENTS_SINCE, name, r.to_ms(since))]

    async def get_event(self, event_id: str) -> dict[str, Any] | None:
        found = await self._select(s.EVENT_BY_ID, event_id)
        return r.event_from_row(found[0]) if found else None

    # -- sidecar tokens --------------------------------------------------------------------

    async def insert_token(self, token: SidecarToken, secret_hash: bytes) -> None:
        await self._queue(s.TOKEN, token.id, r.token_row(token, secret_hash))

    async def get_token(self, token_id: str) -> SidecarToken | None:
        found = await self.find_token(token_id)
        return None if found is None else found[0]

    async def find_token(self, token_id: str) -> tuple[SidecarToken, bytes] | None:
        for row in await self._select(s.TOKEN_BY_ID, token_id):
            try:
                return r.token_from_row(row), bytes.fromhex(row[-1])
            except ValueError:  # a damaged hash matches nothing
                return None
        return None

    async def list_tokens(self) -> list[SidecarToken]:
        return [r.token_from_row(row) for row in await self._select(s.TOKENS_NEWEST)]

    async def revoke_token(self, token_id: str, *, at: float) -> bool:
        revoked: bool = await self._queue(s.REVOKE, token_id, (r.to_ms(at), token_id))
        return revoked

    async def count_token_call(self, token_id: str) -> bool:
        allowed: bool = await self._queue(s.CALL, None, (token_id,))
        return allowed

    # -- the batch's operations, one per kind of write -------------------------------------

    def _operation(self, kind: Write, writes: list[Pending]) -> Operation:
        return _OPERATIONS[kind](self, writes)

    def _query(self, statement: Statement, params: Sequence[Any], now: int | None = None) -> Query:
        return Query(statement.sql(self.dialect), statement.bind(self.dialect, params, now))

    def _many(self, statement: Statement, writes: list[Pending]) -> Query:
        sql = statement.sql(self.dialect)
        return Query(sql, [statement.bind(self.dialect, pending.params) for pending in writes], many=True)

    def _enter(self, writes: list[Pending]) -> Operation:
        for pending in writes:
            run_id, owner, lease_ms, stamp = pending.params
            taken = yield self._query(s.ENTER_RUN, (run_id, owner, lease_ms), stamp)
            if taken:
                pending.result = taken[0][0]
                self._held.take(run_id, pending.result)
                continue
            ((holder, expires),) = yield self._query(s.RUN_HOLDER, (run_id,))
            if holder_gone(holder):  # its process is gone from this machine: take over at once
                taken = yield self._query(s.TAKE_OVER, (owner, lease_ms, run_id, holder), stamp)
                if taken:
                    log.info("run %r: its holder %s is gone; taken over", run_id, holder)
                    pending.result = taken[0][0]
                    self._held.take(run_id, pending.result)
                    continue
                ((holder, expires),) = yield self._query(s.RUN_HOLDER, (run_id,))
            pending.error = RunBusyError(run_id, holder, expires / 1000)

    def _fenced(self, pending: Pending, run_id: str, fences: Fenced) -> bool:
        """Whether this journal still holds ``run_id``; else the write is refused."""
        held = self._held.get(run_id)
        current = fences.get(run_id)
        if held is None:
            pending.error = not_entered(run_id)
        elif current is None or current[1] != held:
            pending.error = RunLeaseLostError(run_id, None if current is None else current[0])
        return pending.error is None

    def _renew(self, writes: list[Pending]) -> Operation:
        for pending in writes:
            run_id, lease_ms, stamp = pending.params
            fence = self._held.get(run_id)
            renewed = fence is not None and (
                yield self._query(s.RENEW_RUN, (lease_ms, run_id, self.owner, fence), stamp)
            )
            pending.result = bool(renewed)

    def _release(self, writes: list[Pending]) -> Operation:
        for pending in writes:
            fence = self._held.get(pending.params)
            if fence is not None:
                yield self._query(s.RELEASE_RUN, (pending.params, self.owner, fence))
            self._held.leave(pending.params)

    def _end(self, writes: list[Pending]) -> Operation:
        fences = yield from self._fences({pending.params[0] for pending in writes})
        for pending in writes:
            run_id, status, error, stamp = pending.params
            if self._fenced(pending, run_id, fences):
                yield self._query(s.END_RUN, (status, error, run_id, self._held.get(run_id)), stamp)

    def _events(self, writes: list[Pending]) -> Operation:
        yield self._many(s.RECORD_EVENT, writes)
        yield from self._notify(writes)

    def _returning(self, statement: Statement, writes: list[Pending]) -> Operation:
        for pending in writes:
            pending.result = bool((yield self._query(statement, pending.params)))

    def _cancel(self, writes: list[Pending]) -> Operation:
        for pending in writes:
            run_id, by, channel, reason, stamp = pending.params
            error = rq.cancel_error(by, channel, reason)
            taken = yield self._query(rq.CANCEL_RUN, (error, error, run_id), stamp)
            if taken:
                yield self._query(rq.RECORD_CANCEL, (run_id, taken[0][0], by, channel, reason), stamp)
                yield self._query(rq.CANCEL_REQUESTS, (by, channel, reason, run_id), stamp)
            pending.result = bool(taken)

    def _decide(self, writes: list[Pending]) -> Operation:
        for pending in writes:
            condition, params = pending.params
            pending.result = bool((yield self._query(DECISIONS[condition], params)))

    def _functions(self, writes: list[Pending]) -> Operation:
        for pending in writes:
            statements, stamp = pending.params
            results = []
            for statement, params in statements:
                results.append((yield self._query(statement, params, stamp)))
            pending.result = results


def _insert(statement: Statement) -> Callable[[SQLJournal, list[Pending]], Operation]:
    def operation(journal: SQLJournal, writes: list[Pending]) -> Operation:
        yield journal._many(statement, writes)

    return operation


_OPERATIONS: dict[Write, Callable[[SQLJournal, list[Pending]], Operation]] = {
    s.ENTER: SQLJournal._enter,
    s.STEP: lambda journal, writes: journal._steps(writes),  # the dialect's own
    s.RENEW: SQLJournal._renew,
    s.RELEASE: SQLJournal._release,
    s.END: SQLJournal._end,
    s.EVENT: SQLJournal._events,
    s.TOKEN: _insert(s.INSERT_TOKEN),
    s.REVOKE: lambda journal, writes: journal._returning(s.REVOKE_TOKEN, writes),
    s.CALL: lambda journal, writes: journal._returning(s.COUNT_CALL, writes),
    s.APPROVAL: _insert(INSERT_REQUEST),
    s.DECIDE: SQLJournal._decide,
    s.CANCEL: SQLJournal._cancel,
    s.FUNCTIONS: SQLJournal._functions,
}
