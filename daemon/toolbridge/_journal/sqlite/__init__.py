"""The journal in one SQLite file: every run, step, event and sidecar token.

The journal is the source of truth for replay and the trace. Every write goes through the
group commit (:mod:`.commit`): all writes queued while one batch commits go into the next,
and each batch is one explicit ``BEGIN IMMEDIATE ... COMMIT`` transaction (step snapshots as
multi-row upserts), run as one function on the writer's own stdlib ``sqlite3`` connection in
its own thread (:mod:`.writer`): one wake-up of the event loop per batch. Nothing else writes
on that connection, so nothing lands inside another batch's transaction by accident. A lone
write that finds the journal idle commits on the loop instead (:mod:`.inline`), and a lone
step there is a single statement, its own transaction. Reads run as single statements on a
second connection (aiosqlite), which also migrates the file.

Runs are leased: a journal enters a run by taking its lease in the database (see
:meth:`SQLiteJournal.enter_run`), and every step write checks, inside the batch's
transaction, that the run's fence is still the one this journal took. A daemon that was
paused or killed past its lease can therefore never overwrite the new holder's steps.

Durability: WAL mode. With ``durability="normal"`` (``synchronous=NORMAL``, the default) a
committed step survives the daemon being killed at any point; a power loss or kernel crash
may lose the last commits. ``durability="full"`` (``synchronous=FULL``) survives those too,
at the cost of an fsync per commit.

What both dialects do alike (every method of the ``Journal`` protocol, every batch
operation but the step upsert) is :class:`~toolbridge._journal.sqljournal.SQLJournal`'s; this
package holds what is SQLite's own: the threads, the pragmas and migrations, the multi-row
upsert fenced in the statement, and the host's clock (:func:`now`, which tests move).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from toolbridge._errors import JournalError, RunLeaseLostError
from toolbridge._journal import rows as r
from toolbridge._journal import statements as s
from toolbridge._journal.commit import Done, GroupCommit, Pending
from toolbridge._journal.sqlite.checkpoints import Checkpoints
from toolbridge._journal.sqlite.files import check_schema, prepare_file, sqlite_error
from toolbridge._journal.sqlite.inline import InlineCommits, busy
from toolbridge._journal.sqlite.migrations import migrate
from toolbridge._journal.sqlite.statements import (
    ROWS_PER_STATEMENT,
    SQLITE,
    UPSERT_STEP,
    fences,
    upsert_steps,
)
from toolbridge._journal.sqlite.writer import Writer
from toolbridge._journal.sqljournal import (
    Durability,
    Fenced,
    Operation,
    Query,
    Rows,
    SQLJournal,
    by_kind,
    new_owner,
    not_entered,
)
from toolbridge._records import now

__all__ = ["Durability", "SQLiteJournal", "new_owner", "now"]

log = logging.getLogger("toolbridge")

_RELEASE_ALL = s.RELEASE_ALL.sql(SQLITE)


def _daemon_thread(connection: aiosqlite.Connection) -> aiosqlite.Connection:
    """Make the connection's worker thread a daemon, before it starts.

    aiosqlite's thread is not a daemon, so a host that forgets to close its bridge would
    never exit. A commit is durable once it resolves, so dying with the thread loses nothing
    that was acknowledged. (aiosqlite < 0.21 made the connection itself the thread.)
    """
    thread: threading.Thread = getattr(connection, "_thread", None) or connection  # type: ignore[assignment]
    thread.daemon = True
    return connection


class SQLiteJournal(SQLJournal):
    """The journal in one SQLite file (WAL mode, numbered migrations, group commit, leases).

    Args:
        path: The database file; created with its schema when missing.
        durability: ``"normal"`` survives a killed process, ``"full"`` a power loss too.
        owner: Who this journal enters runs as; a fresh ``host:pid:random`` by default.
    """

    dialect = SQLITE

    def __init__(
        self, path: str | os.PathLike[str], *, durability: Durability = "normal", owner: str | None = None
    ) -> None:
        if durability not in ("normal", "full"):
            raise ValueError("durability must be 'normal' or 'full'")
        self.path = Path(path)
        self.location: str | None = str(self.path)
        self._place = os.path.realpath(self.path)  # one file, however it is named
        self._setup(owner)
        self._durability = durability
        self._db: aiosqlite.Connection | None = None
        self._writer: Writer | None = None
        self._inline: InlineCommits | None = None
        self._checkpoints: Checkpoints | None = None

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise JournalError("the journal is not open")
        return self._db

    async def open(self) -> None:
        await prepare_file(self.path)  # created 0600 and whole, or checked to be a journal
        # Autocommit mode: the group commit and the migrations write in explicit transactions.
        self._db = await _daemon_thread(aiosqlite.connect(self.path, isolation_level=None))
        try:
            await check_schema(self._db, self.path)
            await _into_wal(self._db)
            await self._db.execute(f"PRAGMA synchronous={self._durability.upper()}")
            await self._db.execute("PRAGMA busy_timeout=5000")
            await self._db.execute("PRAGMA wal_autocheckpoint=0")  # see .checkpoints
            await migrate(self._db, self.path)
            # Writes go through a connection of their own, one function per batch; this one
            # keeps the reads.
            self._writer = Writer(self.path, synchronous=self._durability.upper())
            await self._writer.start()
            self._checkpoints = Checkpoints(self.path, synchronous=self._durability.upper())
            await self._checkpoints.start()
            if self._durability == "normal":
                self._inline = InlineCommits(self.path)
        except BaseException as exc:
            await self._db.close()
            self._db = None
            await self._stop_threads()
            if isinstance(exc, sqlite3.Error):
                raise sqlite_error(self.path, exc, "opening") from exc
            raise
        eager = None if self._inline is None else self._commit_inline
        self._commits = GroupCommit(self._execute_batch, eager=eager)
        self.functions.wakeups.join(self._place)  # see _journal/wakeups.py

    async def close(self) -> None:
        if self._db is None:
            return
        self.functions.wakeups.leave()
        commits, self._commits = self._commits, None  # later writes fail at once, not in a flush
        if commits is not None:
            await commits.drain()
        try:
            # Runs still held are free at once, not only when their leases run out. The
            # last write, after the last batch: a single statement, its own transaction. If
            # it fails (a full disk), the leases simply expire.
            if self._held.holding and self._writer is not None:
                await self._writer.run(lambda db: db.execute(_RELEASE_ALL, (self.owner,)))
        except sqlite3.Error as exc:
            log.warning("could not release the runs this journal held: %s", exc)
        finally:
            await self._stop_threads()
            if self._inline is not None:
                self._inline.close()
                self._inline = None
            await self._db.close()
        self._db = None

    async def _stop_threads(self) -> None:
        if self._writer is not None:
            await self._writer.stop()
            self._writer = None
        if self._checkpoints is not None:
            await self._checkpoints.stop()
            self._checkpoints = None

    async def _rows(self, sql: str, params: tuple[Any, ...]) -> Sequence[Sequence[Any]]:
        try:
            return list(await self.db.execute_fetchall(sql, params))
        except sqlite3.Error as exc:  # a damaged page met mid-run: name the file, say what to do
            raise sqlite_error(self.path, exc, "reading") from exc

    def _named(self, exc: BaseException | None) -> BaseException | None:
        return sqlite_error(self.path, exc, "writing") if isinstance(exc, sqlite3.Error) else exc

    def _host_now(self) -> int:
        # One file, one host: the leases run on its clock (read through this module, where
        # tests move it).
        return r.to_ms(now())

    def watch_events(self, listener: Callable[[dict[str, Any]], None]) -> None:
        # One file has no notifications: another process's events are found when a wait
        # reads the journal (at the start of each wait window).
        return None

    # -- the batch: one transaction, one function in the writer's thread -------------------

    def _execute_batch(self, batch: Sequence[Pending], done: Done) -> None:
        if self._writer is None or self._checkpoints is None:
            raise JournalError("the journal is not open")
        try:
            inline = self._commit_inline(batch)
        except sqlite3.Error as exc:
            raise sqlite_error(self.path, exc, "writing") from exc
        if inline:
            done(None)
            return
        self._checkpoints.committed()
        self._writer.submit(lambda db: self._run_batch(db, batch), lambda exc: done(self._named(exc)))

    def _commit_inline(self, batch: Sequence[Pending]) -> bool:
        """Commit ``batch`` on the loop, unless the writer should (see :mod:`.inline`)."""
        inline, checkpoints = self._inline, self._checkpoints
        if inline is None or checkpoints is None or not inline.commit(self._run_inline, batch):
            return False
        checkpoints.committed()
        return True

    def _run_inline(self, db: sqlite3.Connection, batch: Sequence[Pending]) -> None:
        """:meth:`_run_batch` on the loop's own connection, which takes lone writes only.

        A lone step (a call's outcome: the write on every call's path) is one statement, its
        own transaction: with no ``BEGIN IMMEDIATE`` and ``COMMIT`` around it, and a
        single-row upsert, it costs about 30 µs less than the batch's form. That connection
        never waits for the lock (see :mod:`.inline`), so a statement that cannot take it at
        once fails ``SQLITE_BUSY`` having written nothing, and the writer takes the batch.
        """
        if len(batch) == 1 and batch[0].kind is s.STEP:
            self._lone_step(db, batch[0])
        else:
            self._run_batch(db, batch)

    def _lone_step(self, db: sqlite3.Connection, pending: Pending) -> None:
        run_id = pending.params[0]
        held = self._held.get(run_id)
        if held is None:
            pending.error = not_entered(run_id)
        elif not db.execute(UPSERT_STEP, (*pending.params, run_id, held)).rowcount:
            _run(db, self._taken_over([pending]))

    def _run_batch(self, db: sqlite3.Connection, batch: Sequence[Pending]) -> None:
        db.execute("BEGIN IMMEDIATE")
        try:
            for kind, writes in by_kind(batch).items():
                _run(db, self._operation(kind, writes))
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                db.execute("ROLLBACK")
            raise

    def _steps(self, writes: list[Pending]) -> Operation:
        fenced: list[tuple[Pending, int]] = []
        for pending in writes:
            held = self._held.get(pending.params[0])
            if held is None:
                pending.error = not_entered(pending.params[0])
            else:
                fenced.append((pending, held))
        written: set[tuple[str, str]] = set()
        for start in range(0, len(fenced), ROWS_PER_STATEMENT):
            chunk = fenced[start : start + ROWS_PER_STATEMENT]
            params = [value for pending, held in chunk for value in (*pending.params, held)]
            written.update((row[0], row[1]) for row in (yield Query(upsert_steps(len(chunk)), params)))
        refused = [pending for pending, _ in fenced if (pending.params[0], pending.params[1]) not in written]
        if refused:
            yield from self._taken_over(refused)

    def _taken_over(self, refused: list[Pending]) -> Operation:
        """Refuse step writes the fence turned away: their runs were taken over (say by whom)."""
        current = yield from self._fences({pending.params[0] for pending in refused})
        for pending in refused:
            holder = current.get(pending.params[0])
            pending.error = RunLeaseLostError(pending.params[0], None if holder is None else holder[0])

    def _fences(self, run_ids: set[str]) -> Generator[Query, Rows, Fenced]:
        # Read inside the batch's BEGIN IMMEDIATE: no other connection can take a run over
        # before it commits.
        ordered, found = sorted(run_ids), {}
        for start in range(0, len(ordered), ROWS_PER_STATEMENT):
            chunk = ordered[start : start + ROWS_PER_STATEMENT]
            for run_id, owner, fence in (yield Query(fences(len(chunk)), chunk)):
                found[run_id] = (owner, fence)
        return found


def _run(db: sqlite3.Connection, operation: Operation) -> None:
    """Run a batch operation's queries on ``db`` (in the writer's thread, or inline)."""
    try:
        query = next(operation)
        while True:
            if query.many:
                db.executemany(query.sql, query.params)
                query = operation.send([])
            else:
                query = operation.send(db.execute(query.sql, query.params).fetchall())
    except StopIteration:
        return


WAL_SWITCH_WAIT = 5.0
"""Seconds a journal opening a new file waits for another one switching it to WAL mode."""


async def _into_wal(db: aiosqlite.Connection) -> None:
    """``PRAGMA journal_mode=WAL``, tried again while another connection switches the same file.

    Connections turning a new file to WAL at once (two daemons starting on one journal) each
    hold a shared lock and need an exclusive one; SQLite refuses all but one at once ("database
    is locked") instead of calling the busy handler, since waiting on each other could never
    end. Once one has switched, the pragma only reads that the file is in WAL mode.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAL_SWITCH_WAIT
    while True:
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not busy(exc) or loop.time() >= deadline:
                raise
        await asyncio.sleep(0.005)
