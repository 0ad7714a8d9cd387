"""The journal on PostgreSQL: many daemons on many hosts sharing one database.

The same tables, rows, statements and semantics as the SQLite journal: every method and
batch operation but the step upsert is :class:`~toolbridge._journal.sqljournal.SQLJournal`'s.
This module holds what a shared server adds:

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
import logging
from collections.abc import Callable, Generator, Sequence
from typing import Any, cast

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from toolbridge._errors import JournalError
from toolbridge._journal import statements as s
from toolbridge._journal.commit import GroupCommit, Pending, awaiting
from toolbridge._journal.postgres.events import CHANNEL, Notices, notice
from toolbridge._journal.postgres.schema import migrate
from toolbridge._journal.postgres.statements import (
    FENCES,
    POSTGRES,
    RETRIES,
    UPSERT_STEP,
    UPSERT_STEPS,
    redact,
)
from toolbridge._journal.sqljournal import Durability, Fenced, Operation, Query, Rows, SQLJournal, by_kind
from toolbridge._journal.wakeups import CHANNEL as WAKEUPS

__all__ = ["PostgresJournal"]

log = logging.getLogger("toolbridge")

Conn = asyncpg.Connection | PoolConnectionProxy

COMMAND_TIMEOUT = 10.0
"""Seconds a statement (or a new connection) may take before it fails as a ``JournalError``.

A network that drops the database's packets silently leaves a query waiting for hours (TCP
gives up late); the call waiting on it would never be answered. With a timeout it is
answered ``UNAVAILABLE`` (retryable), never as if it had committed."""
_RELEASE_ALL = s.RELEASE_ALL.sql(POSTGRES)
_DURABLE = frozenset({s.TOKEN, s.REVOKE})
"""Writes committed with a WAL flush whatever the journal's durability: a sidecar token handed
out, or a revocation, must outlive a crash of the server (a token lost makes its sandbox's
every call ``Unauthenticated``; a revocation lost lets a revoked token in again). They are
rare: the flush costs nothing a call pays."""
_SYNCHRONOUS = "SET LOCAL synchronous_commit TO on"


class PostgresJournal(SQLJournal):
    """The journal in a PostgreSQL database, shared by any number of daemons.

    Args:
        url: ``postgresql://user:pass@host:5432/db`` (or ``postgres://``); libpq's query
            parameters work too (``?host=/run/postgresql`` for a Unix socket).
        durability: ``"normal"`` (``synchronous_commit=off``) survives the daemon being
            killed at any point, as every committed write is in the server; a crash of the
            database server or its host may lose the last commits (its WAL writer flushes
            within a few hundred ms), but never a sidecar token minted or revoked (those
            commits always wait for the flush). ``"full"`` (``synchronous_commit=on``) survives those
            too, at the cost of a WAL flush per commit.
        owner: Who this journal enters runs as; a fresh ``host:pid:random`` by default.
        pool_size: Connections kept for reads (plus one for commits, one for ``LISTEN``).
    """

    dialect = POSTGRES

    def __init__(
        self, url: str, *, durability: Durability = "normal", owner: str | None = None, pool_size: int = 4
    ) -> None:
        if not url.startswith(("postgresql://", "postgres://")):
            raise ValueError(f"not a PostgreSQL URL: {redact(url)!r}")
        if durability not in ("normal", "full"):
            raise ValueError("durability must be 'normal' or 'full'")
        self._settings = {"synchronous_commit": "on" if durability == "full" else "off"}
        self._lazy = durability == "normal"  # commits do not wait for their WAL flush
        self.location: str | None = url
        self._setup(owner)
        self._url = url
        self._pool_size = pool_size
        self._pool: asyncpg.Pool | None = None
        self._listen: asyncpg.Connection | None = None
        self._writer: asyncpg.Connection | None = None  # see _writing
        self._notices = Notices(self.owner, self.get_event)

    @property
    def where(self) -> str:
        return redact(self._url)

    async def open(self) -> None:
        try:
            self._pool = await asyncpg.create_pool(
                self._url,
                min_size=1,
                max_size=self._pool_size,
                server_settings=self._settings,
                command_timeout=COMMAND_TIMEOUT,
                timeout=COMMAND_TIMEOUT,
                reset=_keep_session,
            )
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise JournalError(f"cannot open the PostgreSQL journal at {self.where}: {exc}") from exc
        try:
            async with self._pool.acquire() as conn:
                await migrate(conn, self.where)
            await self._writing()
            await self._listen_for_events()
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
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
                await self.pool.execute(_RELEASE_ALL, self.owner)
        finally:
            await self._close_connections()

    async def _listen_for_events(self) -> None:
        self._listen = await asyncpg.connect(self._url, timeout=COMMAND_TIMEOUT)
        self._listen.add_termination_listener(self._listen_lost)
        await self._listen.add_listener(CHANNEL, self._notices.heard)
        # Calls of durable functions between daemons (see _journal/wakeups.py).
        await self._listen.add_listener(WAKEUPS, self.functions.wakeups.heard_notice)

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
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("cannot LISTEN for events on %s (retrying): %s", self.where, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _close_connections(self) -> None:
        await self._notices.close()
        listen, self._listen = self._listen, None
        if listen is not None:
            with contextlib.suppress(Exception):
                await listen.close(timeout=5)
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(Exception):
                await writer.close(timeout=5)
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise JournalError("the journal is not open")
        return self._pool

    async def _rows(self, sql: str, params: tuple[Any, ...]) -> Sequence[Sequence[Any]]:
        try:
            found = await self.pool.fetch(sql, *params)
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise JournalError(f"journal read failed ({self.where}): {exc}") from exc
        return [tuple(row) for row in found]

    def watch_events(self, listener: Callable[[dict[str, Any]], None]) -> None:
        """Call ``listener`` with every event another daemon records, as it commits."""
        self._notices.watch(listener)

    # -- the batch: one transaction --------------------------------------------------------

    async def _writing(self) -> asyncpg.Connection:
        """The connection batches commit on, connected again after one failed.

        Batches commit one at a time (the group commit), so one connection serves them all,
        and a commit skips the pool's acquire and release (measured: about 0.1 ms a call on
        two busy cores, a third of a lone call's commit).
        """
        writer = self._writer
        if writer is None or writer.is_closed():
            writer = self._writer = await asyncpg.connect(
                self._url,
                server_settings=self._settings,
                command_timeout=COMMAND_TIMEOUT,
                timeout=COMMAND_TIMEOUT,
            )
        return writer

    async def _execute_batch(self, batch: Sequence[Pending]) -> None:
        grouped = by_kind(batch)
        for attempt in range(1, RETRIES + 1):
            held = self._held.snapshot()
            try:
                conn = await self._writing()
                if grouped.keys() == {s.STEP}:
                    # One statement (see UPSERT_STEPS): its own transaction, one round trip,
                    # where BEGIN and COMMIT would add two.
                    await _run(conn, self._steps(grouped[s.STEP]))
                    return
                async with conn.transaction():
                    if self._lazy and not grouped.keys().isdisjoint(_DURABLE):
                        await conn.execute(_SYNCHRONOUS)  # see _DURABLE
                    for kind, writes in grouped.items():
                        await _run(conn, self._operation(kind, writes))
                return
            except (asyncpg.DeadlockDetectedError, asyncpg.SerializationError):
                if attempt == RETRIES:
                    raise
                self._held.restore(held)  # the fences taken in the rolled-back attempt were not taken
                for pending in batch:
                    pending.error, pending.result = None, None
            except BaseException:
                # A connection that failed mid-batch (a timeout, a cancel, a dropped socket) is
                # not trusted again: the next batch connects afresh, as the pool would.
                writer, self._writer = self._writer, None
                if writer is not None:
                    writer.terminate()
                raise

    def _fences(self, run_ids: set[str]) -> Generator[Query, Rows, Fenced]:
        """Each run's owner and fence, locked against a takeover until the batch commits."""
        return {row[0]: (row[1], row[2]) for row in (yield Query(FENCES, (sorted(run_ids),)))}

    def _steps(self, writes: list[Pending]) -> Operation:
        taken = [self._held.get(pending.params[0]) for pending in writes]
        sent = [pending.params for pending, fence in zip(writes, taken, strict=True) if fence is not None]
        fences: Fenced = {}
        if sent:
            fenced = [fence for fence in taken if fence is not None]
            if len(sent) == 1:  # a call's outcome, alone: scalars, no arrays to build and unnest
                query = Query(UPSERT_STEP, (*sent[0], fenced[0]))
            else:
                query = Query(UPSERT_STEPS, (*(list(column) for column in zip(*sent, strict=True)), fenced))
            fences = {row[0]: (row[1], row[2]) for row in (yield query)}
        for pending in writes:  # refused: a run not entered, or taken over (its row not written)
            self._fenced(pending, pending.params[0], fences)

    def _notify(self, writes: list[Pending]) -> Operation:
        for pending in writes:
            # Sent when the transaction commits, and only then (see .events).
            yield Query("SELECT pg_notify($1, $2)", (CHANNEL, notice(self.owner, *pending.params)))


async def _keep_session(_conn: Conn) -> None:
    """Hand a connection back to the pool as it is: asyncpg's own reset (``RESET ALL``,
    ``UNLISTEN *``, ...) is a round trip on every release, and undoes nothing this journal
    does (it sets nothing per session, and listens on a connection of its own). asyncpg still
    rolls back a transaction left open before calling this."""


async def _run(conn: Conn, operation: Operation) -> None:
    """Run a batch operation's queries on ``conn``, inside the batch's transaction."""
    try:
        query = next(operation)
        while True:
            if query.many:
                await conn.executemany(query.sql, query.params)
                query = operation.send([])
            else:
                query = operation.send(cast(Rows, await conn.fetch(query.sql, *query.params)))
    except StopIteration:
        return
