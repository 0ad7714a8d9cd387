"""The journal on PostgreSQL: many daemons on many hosts sharing one database.

The same tables, rows and semantics as the SQLite journal (:mod:`.sqlite`), with what a
shared server adds:

- Group commit as in SQLite: every write queued while one batch commits goes into the next,
  and each batch is one transaction on one pooled connection. A batch of step snapshots is a
  single ``INSERT ... SELECT FROM unnest(...) ON CONFLICT DO UPDATE`` (one prepared statement
  whatever the row count).
- Leases and fences: entering a run takes its lease in one ``INSERT ... ON CONFLICT DO UPDATE
  ... WHERE`` (new, free, already ours, or expired: a takeover, which increases the fence), so
  two daemons racing for a run cannot both win. A batch that writes a run's steps first reads
  the run's row ``FOR SHARE``: a takeover, which updates that row, waits for the batch to
  commit, and a batch that starts after a takeover sees the new fence and refuses the old
  holder's rows. Lease times come from the database's clock, so hosts' clocks never decide
  who holds a run.
- Sidecar call budgets are one ``UPDATE ... WHERE calls < max_calls``: atomic in the
  database, across every daemon.
- Events cross hosts: recording an event also sends ``NOTIFY`` in the same transaction, and
  every journal ``LISTEN``s on a connection of its own, so a wait on host B wakes when host A
  sends (``watch_events``).

Driver: asyncpg (measured against psycopg 3 in ``bench/pg_driver.py``: a 32-row batch costs
about half as much, and LISTEN needs no polling loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from toolbridge._errors import JournalError, RunBusyError, RunLeaseLostError
from toolbridge._journal import rows as r
from toolbridge._journal import runquery as rq
from toolbridge._journal.base import Durability
from toolbridge._journal.commit import GroupCommit, Pending, awaiting
from toolbridge._journal.fences import Fences
from toolbridge._journal.postgres_approvals import PostgresApprovals, decide_requests, insert_requests
from toolbridge._journal.postgres_events import CHANNEL, Notices, notice
from toolbridge._journal.postgres_schema import migrate
from toolbridge._journal.postgres_sql import (
    COUNT_CALL,
    END_RUN,
    ENTER_RUN,
    FENCES,
    INSERT_TOKEN,
    NOW,
    RECORD_EVENT,
    RELEASE_ALL,
    RELEASE_RUN,
    RENEW_RUN,
    RETRIES,
    REVOKE_TOKEN,
    RUN_SELECT,
    UPSERT_STEPS,
    redact,
)
from toolbridge._journal.sqlite import new_owner
from toolbridge._journal.stepreads import StepReads
from toolbridge._records import RunStatus, RunSummary, SidecarToken, StepRecord, now

__all__ = ["PostgresJournal"]

log = logging.getLogger("toolbridge")

Conn = asyncpg.Connection | PoolConnectionProxy


class PostgresJournal(StepReads):
    """The journal in a PostgreSQL database, shared by any number of daemons.

    Args:
        url: ``postgresql://user:pass@host:5432/db`` (or ``postgres://``); libpq's query
            parameters work too (``?host=/run/postgresql`` for a Unix socket).
        durability: ``"normal"`` (``synchronous_commit=off``) survives the daemon being
            killed at any point, as every committed write is in the server; a crash of the
            database server or its host may lose the last commits (its WAL writer flushes
            within a few hundred ms). ``"full"`` (``synchronous_commit=on``) survives those
            too, at the cost of a WAL flush per commit.
        owner: Who this journal enters runs as; a fresh ``host:pid:random`` by default.
        pool_size: Connections kept for reads and commits (plus one for ``LISTEN``).
    """

    _numbered_placeholders = True

    def __init__(
        self, url: str, *, durability: Durability = "normal", owner: str | None = None, pool_size: int = 4
    ) -> None:
        if not url.startswith(("postgresql://", "postgres://")):
            raise ValueError(f"not a PostgreSQL URL: {redact(url)!r}")
        if durability not in ("normal", "full"):
            raise ValueError("durability must be 'normal' or 'full'")
        self._settings = {"synchronous_commit": "on" if durability == "full" else "off"}
        self.location: str | None = url
        self.owner = owner or new_owner()
        self._url = url
        self._pool_size = pool_size
        self._pool: asyncpg.Pool | None = None
        self._listen: asyncpg.Connection | None = None
        self._commits: GroupCommit | None = None
        self._held = Fences()  # the fence of each run held, and of those left lately
        self._notices = Notices(self.owner, self.get_event)
        self.approvals = PostgresApprovals(self._fetch, self._queue)

    @property
    def where(self) -> str:
        return redact(self._url)

    async def open(self) -> None:
        try:
            self._pool = await asyncpg.create_pool(
                self._url, min_size=1, max_size=self._pool_size, server_settings=self._settings
            )
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise JournalError(f"cannot open the PostgreSQL journal at {self.where}: {exc}") from exc
        try:
            async with self._pool.acquire() as conn:
                await migrate(conn, self.where)
            await self._listen_for_events()
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            await self._close_connections()
            raise JournalError(f"cannot open the PostgreSQL journal at {self.where}: {exc}") from exc
        except BaseException:
            await self._close_connections()
            raise
        self._commits = GroupCommit(awaiting(self._execute_batch))

    async def close(self) -> None:
        if self._pool is None:
            return
        commits, self._commits = self._commits, None  # later writes fail at once, not in a flush
        if commits is not None:
            await commits.drain()
        try:
            # Runs still held are free at once, not only when their leases run out.
            with contextlib.suppress(OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                await self.pool.execute(RELEASE_ALL, self.owner)
        finally:
            await self._close_connections()

    async def _listen_for_events(self) -> None:
        self._listen = await asyncpg.connect(self._url)
        self._listen.add_termination_listener(self._listen_lost)
        await self._listen.add_listener(CHANNEL, self._notices.heard)

    def _listen_lost(self, _conn: object) -> None:
        # The server restarted or the network dropped the connection: listen again, so that
        # cross-host wake-ups resume (meanwhile waits find events at their next window).
        if self._commits is not None:  # not closing
            self._notices.spawn(self._listen_again())

    async def _listen_again(self) -> None:
        delay = 0.1
        while self._commits is not None:
            try:
                await self._listen_for_events()
                return
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("cannot LISTEN for events on %s (retrying): %s", self.where, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _close_connections(self) -> None:
        await self._notices.close()
        listen, self._listen = self._listen, None
        if listen is not None:
            with contextlib.suppress(Exception):
                await listen.close(timeout=5)
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise JournalError("the journal is not open")
        return self._pool

    def _queue(self, kind: str, key: Any, params: Any) -> asyncio.Future[Any]:
        if self._commits is None:
            raise JournalError("the journal is not open")
        return self._commits.add(kind, key, params)

    async def _rows(self, sql: str, params: tuple[Any, ...]) -> Sequence[Sequence[Any]]:
        return [tuple(row) for row in await self._fetch(sql, *params)]

    async def _fetch(self, sql: str, *params: Any) -> list[asyncpg.Record]:
        try:
            rows: list[asyncpg.Record] = await self.pool.fetch(sql, *params)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise JournalError(f"journal read failed ({self.where}): {exc}") from exc
        return rows

    # -- runs and steps --------------------------------------------------------------------

    async def enter_run(self, run_id: str, *, lease: float, limit: int | None = None) -> list[StepRecord]:
        await self._queue("enter", None, (run_id, self.owner, r.to_ms(lease)))
        return await self.load_steps(run_id, limit=limit)

    async def renew_run(self, run_id: str, *, lease: float) -> bool:
        renewed: bool = await self._queue("renew", run_id, (run_id, r.to_ms(lease)))
        return renewed

    async def release_run(self, run_id: str) -> None:
        await self._queue("release", run_id, run_id)

    def write(self, rec: StepRecord) -> asyncio.Future[None]:
        return self._queue("step", (rec.run_id, rec.key), r.step_row(rec))

    async def end_run(self, run_id: str, status: RunStatus, error: str | None = None) -> None:
        await self._queue("end", run_id, (status, error, run_id))

    async def list_runs(self, limit: int = 50) -> list[RunSummary]:
        found = await self._fetch(f"{RUN_SELECT} ORDER BY r.started_at DESC LIMIT $1", limit)
        return [r.run_from_row(tuple(row)) for row in found]

    async def get_run(self, run_id: str) -> RunSummary | None:
        found = await self._fetch(f"{RUN_SELECT} WHERE r.run_id = $1", run_id)
        return r.run_from_row(tuple(found[0])) if found else None

    async def find_runs(self, query: rq.RunQuery) -> list[RunSummary]:
        sql, params = rq.find_runs_sql(query, placeholder=_dollar, like="ILIKE", now_ms=r.to_ms(now()))
        return [r.run_from_row(tuple(row)) for row in await self._fetch(sql, *params)]

    async def tool_calls(self, tool: str, *, limit: int) -> list[rq.ToolCall]:
        sql, params = rq.tool_calls_sql(tool, limit, placeholder=_dollar)
        return [rq.tool_call_from_row(tuple(row)) for row in await self._fetch(sql, *params)]

    async def cancel_run(self, run_id: str, *, by: str, channel: str, reason: str | None) -> bool:
        end, record, requests = rq.cancel_statements(_dollar)
        stamp, error = r.to_ms(now()), rq.cancel_error(by, channel, reason)
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                fence = await conn.fetchval(end, stamp, error, error, run_id)
                if fence is None:
                    return False
                await conn.execute(record, run_id, fence, by, channel, reason, stamp)
                await conn.execute(requests, stamp, by, channel, reason, run_id)
                return True
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise JournalError(f"could not cancel run {run_id!r} ({self.where}): {exc}") from exc

    async def orphaned_runs(self, limit: int = 100) -> list[RunSummary]:
        """Runs still ``running`` whose holder left or whose lease ran out (database clock)."""
        found = await self._fetch(
            f"{RUN_SELECT} WHERE r.status = 'running' AND (r.lease_expires_at IS NULL "
            f"OR r.lease_expires_at <= {NOW}) ORDER BY r.started_at LIMIT $1",
            limit,
        )
        return [r.run_from_row(tuple(row)) for row in found]

    # -- events ----------------------------------------------------------------------------

    async def record_event(self, event: dict[str, Any]) -> None:
        data = json.dumps(event["data"])
        params = (event["id"], event["name"], data, r.to_ms(event["ts"]))
        await self._queue("event", event["id"], params)

    async def events_since(self, name: str, since: float) -> list[dict[str, Any]]:
        found = await self._fetch(
            "SELECT event_id, name, data_json, ts FROM events WHERE name = $1 AND ts >= $2 ORDER BY ts",
            name,
            r.to_ms(since),
        )
        return [r.event_from_row(tuple(row)) for row in found]

    async def get_event(self, event_id: str) -> dict[str, Any] | None:
        found = await self._fetch(
            "SELECT event_id, name, data_json, ts FROM events WHERE event_id = $1", event_id
        )
        return r.event_from_row(tuple(found[0])) if found else None

    def watch_events(self, listener: Callable[[dict[str, Any]], None]) -> None:
        """Call ``listener`` with every event another daemon records, as it commits."""
        self._notices.watch(listener)

    # -- sidecar tokens --------------------------------------------------------------------

    async def insert_token(self, token: SidecarToken, secret_hash: bytes) -> None:
        await self._queue("token", token.id, r.token_row(token, secret_hash))

    async def get_token(self, token_id: str) -> SidecarToken | None:
        found = await self.find_token(token_id)
        return None if found is None else found[0]

    async def find_token(self, token_id: str) -> tuple[SidecarToken, bytes] | None:
        found = await self._fetch(
            f"SELECT {r.TOKEN_COLUMNS}, secret_hash FROM sidecar_tokens WHERE token_id = $1", token_id
        )
        for row in found:
            try:
                return r.token_from_row(tuple(row)), bytes.fromhex(row[-1])
            except ValueError:  # a damaged hash matches nothing
                return None
        return None

    async def list_tokens(self) -> list[SidecarToken]:
        found = await self._fetch(f"SELECT {r.TOKEN_COLUMNS} FROM sidecar_tokens ORDER BY created_at DESC")
        return [r.token_from_row(tuple(row)) for row in found]

    async def revoke_token(self, token_id: str, *, at: float) -> bool:
        revoked: bool = await self._queue("revoke", token_id, (r.to_ms(at), token_id))
        return revoked

    async def count_token_call(self, token_id: str) -> bool:
        allowed: bool = await self._queue("call", None, (token_id,))
        return allowed

    # -- the batch: one transaction --------------------------------------------------------

    async def _execute_batch(self, batch: Sequence[Pending]) -> None:
        by_kind: dict[str, list[Pending]] = {}
        for pending in batch:
            by_kind.setdefault(pending.kind, []).append(pending)
        for attempt in range(1, RETRIES + 1):
            held = self._held.snapshot()
            try:
                async with self.pool.acquire() as conn, conn.transaction():
                    for kind, writes in by_kind.items():
                        await _OPERATIONS[kind](self, conn, writes)
                return
            except (asyncpg.DeadlockDetectedError, asyncpg.SerializationError):
                if attempt == RETRIES:
                    raise
                self._held.restore(held)  # the fences taken in the rolled-back attempt were not taken
                for pending in batch:
                    pending.error, pending.result = None, None

    async def _enter(self, conn: Conn, writes: list[Pending]) -> None:
        for pending in writes:
            run_id = pending.params[0]
            fence = await conn.fetchval(ENTER_RUN, *pending.params)
            if fence is not None:
                self._held.take(run_id, fence)
                pending.result = fence
                continue
            holder = await conn.fetchrow("SELECT owner, lease_expires_at FROM runs WHERE run_id = $1", run_id)
            assert holder is not None  # the insert found it there
            pending.error = RunBusyError(run_id, holder[0], holder[1] / 1000)

    async def _fences(self, conn: Conn, run_ids: set[str]) -> dict[str, tuple[str | None, int]]:
        """Each run's owner and fence, locked against a takeover until the batch commits."""
        return {row[0]: (row[1], row[2]) for row in await conn.fetch(FENCES, sorted(run_ids))}

    def _fenced(self, pending: Pending, run_id: str, fences: dict[str, tuple[str | None, int]]) -> bool:
        held = self._held.get(run_id)
        current = fences.get(run_id)
        if held is None:
            pending.error = JournalError(f"run {run_id!r} was not entered through this journal")
        elif current is None or current[1] != held:
            pending.error = RunLeaseLostError(run_id, None if current is None else current[0])
        return pending.error is None

    async def _steps(self, conn: Conn, writes: list[Pending]) -> None:
        fences = await self._fences(conn, {pending.params[0] for pending in writes})
        allowed = [pending.params for pending in writes if self._fenced(pending, pending.params[0], fences)]
        if allowed:
            await conn.execute(UPSERT_STEPS, *(list(column) for column in zip(*allowed, strict=True)))

    async def _renew(self, conn: Conn, writes: list[Pending]) -> None:
        for pending in writes:
            run_id, lease_ms = pending.params
            fence = self._held.get(run_id)
            found = fence is not None and await conn.fetchval(RENEW_RUN, run_id, lease_ms, self.owner, fence)
            pending.result = bool(found)

    async def _release(self, conn: Conn, writes: list[Pending]) -> None:
        for pending in writes:
            fence = self._held.get(pending.params)
            if fence is not None:
                await conn.execute(RELEASE_RUN, pending.params, self.owner, fence)
            self._held.leave(pending.params)

    async def _end(self, conn: Conn, writes: list[Pending]) -> None:
        fences = await self._fences(conn, {pending.params[2] for pending in writes})
        for pending in writes:
            run_id = pending.params[2]
            if self._fenced(pending, run_id, fences):
                await conn.execute(END_RUN, *pending.params, self._held.get(run_id))

    async def _events(self, conn: Conn, writes: list[Pending]) -> None:
        await conn.executemany(RECORD_EVENT, [pending.params for pending in writes])
        for pending in writes:
            # Sent when the transaction commits, and only then (see postgres_events).
            await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, notice(self.owner, *pending.params))

    async def _simple(self, sql: str, conn: Conn, writes: list[Pending]) -> None:
        await conn.executemany(sql, [pending.params for pending in writes])

    async def _returning(self, sql: str, conn: Conn, writes: list[Pending]) -> None:
        for pending in writes:
            pending.result = bool(await conn.fetchval(sql, *pending.params))


_Operation = Callable[[PostgresJournal, Conn, list[Pending]], Awaitable[None]]
_OPERATIONS: dict[str, _Operation] = {
    "enter": PostgresJournal._enter,
    "step": PostgresJournal._steps,
    "renew": PostgresJournal._renew,
    "release": PostgresJournal._release,
    "end": PostgresJournal._end,
    "event": PostgresJournal._events,
    "token": lambda journal, conn, writes: journal._simple(INSERT_TOKEN, conn, writes),
    "revoke": lambda journal, conn, writes: journal._returning(REVOKE_TOKEN, conn, writes),
    "call": lambda journal, conn, writes: journal._returning(COUNT_CALL, conn, writes),
    "approval": lambda journal, conn, writes: insert_requests(conn, writes),
    "decide": lambda journal, conn, writes: decide_requests(conn, writes),
}


def _dollar(n: int) -> str:
    return f"${n}"
