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

The SQL sticks to what SQLite and PostgreSQL share (``ON CONFLICT ... DO UPDATE``,
``RETURNING``, integer milliseconds), so the same statements can move to PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import secrets
import socket
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import aiosqlite

from toolbridge._errors import JournalError, RunBusyError, RunLeaseLostError
from toolbridge._journal import rows as r
from toolbridge._journal import runquery as rq
from toolbridge._journal import statements as stmt
from toolbridge._journal.approvals import APPROVAL_OPERATIONS, SQLiteApprovals
from toolbridge._journal.checkpoints import Checkpoints
from toolbridge._journal.commit import Done, GroupCommit, Pending
from toolbridge._journal.fences import Fences
from toolbridge._journal.inline import InlineCommits, busy
from toolbridge._journal.migrations import migrate
from toolbridge._journal.stepreads import StepReads
from toolbridge._journal.writer import Writer
from toolbridge._records import RunStatus, RunSummary, SidecarToken, StepRecord, now

__all__ = ["Durability", "SQLiteJournal", "new_owner"]

log = logging.getLogger("toolbridge")

Durability = Literal["normal", "full"]
"""``"normal"`` survives a killed process (``synchronous=NORMAL``), ``"full"`` a power loss."""


def new_owner() -> str:
    """An owner id for one journal instance: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def _not_entered(run_id: str) -> JournalError:
    return JournalError(f"run {run_id!r} was not entered by this journal: enter it before writing to it")


def _daemon_thread(connection: aiosqlite.Connection) -> aiosqlite.Connection:
    """Make the connection's worker thread a daemon, before it starts.

    aiosqlite's thread is not a daemon, so a host that forgets to close its bridge would
    never exit. A commit is durable once it resolves, so dying with the thread loses nothing
    that was acknowledged. (aiosqlite < 0.21 made the connection itself the thread.)
    """
    thread: threading.Thread = getattr(connection, "_thread", None) or connection  # type: ignore[assignment]
    thread.daemon = True
    return connection


class SQLiteJournal(StepReads):
    """The journal in one SQLite file (WAL mode, numbered migrations, group commit, leases).

    Args:
        path: The database file; created with its schema when missing.
        durability: ``"normal"`` survives a killed process, ``"full"`` a power loss too.
        owner: Who this journal enters runs as; a fresh ``host:pid:random`` by default.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, durability: Durability = "normal", owner: str | None = None
    ) -> None:
        if durability not in ("normal", "full"):
            raise ValueError("durability must be 'normal' or 'full'")
        self.path = Path(path)
        self.location: str | None = str(self.path)
        self.owner = owner or new_owner()
        self._durability = durability
        self._db: aiosqlite.Connection | None = None
        self._commits: GroupCommit | None = None
        self._writer: Writer | None = None
        self._inline: InlineCommits | None = None
        self._checkpoints: Checkpoints | None = None
        self._held = Fences()  # the fence of each run held, and of those left lately
        self.approvals = SQLiteApprovals(lambda: self.db, self._queue)

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise JournalError("the journal is not open")
        return self._db

    async def open(self) -> None:
        # Autocommit mode: the group commit and the migrations write in explicit transactions.
        self._db = await _daemon_thread(aiosqlite.connect(self.path, isolation_level=None))
        try:
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
        except BaseException:
            await self._db.close()
            self._db = None
            await self._stop_threads()
            raise
        eager = None if self._inline is None else self._commit_inline
        self._commits = GroupCommit(self._execute_batch, eager=eager)

    async def close(self) -> None:
        if self._db is None:
            return
        commits, self._commits = self._commits, None  # later writes fail at once, not in a flush
        if commits is not None:
            await commits.drain()
        try:
            # Runs still held are free at once, not only when their leases run out. The
            # last write, after the last batch: a single statement, its own transaction. If
            # it fails (a full disk), the leases simply expire.
            if self._held.holding and self._writer is not None:
                await self._writer.run(lambda db: db.execute(stmt.RELEASE_ALL, (self.owner,)))
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
        return list(await self.db.execute_fetchall(sql, params))

    def _queue(self, kind: str, key: Any, params: Any) -> asyncio.Future[Any]:
        if self._commits is None:
            raise JournalError("the journal is not open")
        return self._commits.add(kind, key, params)

    # -- runs and steps --------------------------------------------------------------------

    async def enter_run(self, run_id: str, *, lease: float, limit: int | None = None) -> list[StepRecord]:
        stamp = r.to_ms(now())
        await self._queue("enter", None, (run_id, stamp, stamp, self.owner, stamp + r.to_ms(lease)))
        return await self.load_steps(run_id, limit=limit)

    async def renew_run(self, run_id: str, *, lease: float) -> bool:
        renewed: bool = await self._queue("renew", run_id, (run_id, r.to_ms(now() + lease)))
        return renewed

    async def release_run(self, run_id: str) -> None:
        await self._queue("release", run_id, run_id)

    def write(self, rec: StepRecord) -> asyncio.Future[None]:
        return self._queue("step", (rec.run_id, rec.key), r.step_row(rec))

    async def end_run(self, run_id: str, status: RunStatus, error: str | None = None) -> None:
        stamp = r.to_ms(now())
        await self._queue("end", run_id, (status, stamp, stamp, error, run_id))

    async def list_runs(self, limit: int = 50) -> list[RunSummary]:
        return await self._runs("ORDER BY r.started_at DESC LIMIT ?", (limit,))

    async def get_run(self, run_id: str) -> RunSummary | None:
        found = await self._runs("WHERE r.run_id = ?", (run_id,))
        return found[0] if found else None

    async def find_runs(self, query: rq.RunQuery) -> list[RunSummary]:
        sql, params = rq.find_runs_sql(query, placeholder=_numbered, now_ms=r.to_ms(now()))
        return await self._runs_sql(sql, params)

    async def tool_calls(self, tool: str, *, limit: int) -> list[rq.ToolCall]:
        sql, params = rq.tool_calls_sql(tool, limit, placeholder=_numbered)
        return [rq.tool_call_from_row(row) for row in await self.db.execute_fetchall(sql, params)]

    async def cancel_run(self, run_id: str, *, by: str, channel: str, reason: str | None) -> bool:
        if self._writer is None:
            raise JournalError("the journal is not open")
        end, record, requests = rq.cancel_statements(_numbered)
        stamp, error = r.to_ms(now()), rq.cancel_error(by, channel, reason)

        def cancel(db: sqlite3.Connection) -> bool:
            db.execute("BEGIN IMMEDIATE")
            try:
                taken = db.execute(end, (stamp, error, error, run_id)).fetchall()
                if taken:
                    db.execute(record, (run_id, taken[0][0], by, channel, reason, stamp))
                    db.execute(requests, (stamp, by, channel, reason, run_id))
                db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(Exception):
                    db.execute("ROLLBACK")
                raise
            return bool(taken)

        try:
            return await self._writer.run(cancel)
        except sqlite3.Error as exc:
            raise JournalError(f"could not cancel run {run_id!r} ({self.path}): {exc}") from exc

    async def _runs_sql(self, sql: str, params: Sequence[Any]) -> list[RunSummary]:
        return [r.run_from_row(row) for row in await self.db.execute_fetchall(sql, params)]

    async def orphaned_runs(self, limit: int = 100) -> list[RunSummary]:
        return await self._runs(
            "WHERE r.status = 'running' AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= ?) "
            "ORDER BY r.started_at LIMIT ?",
            (r.to_ms(now()), limit),
        )

    async def _runs(self, where: str, params: tuple[Any, ...]) -> list[RunSummary]:
        found = await self.db.execute_fetchall(f"SELECT {r.RUN_COLUMNS} FROM runs r {where}", params)
        return [r.run_from_row(row) for row in found]

    # -- events ----------------------------------------------------------------------------

    async def record_event(self, event: dict[str, Any]) -> None:
        params = (event["id"], event["name"], json.dumps(event["data"]), r.to_ms(event["ts"]))
        await self._queue("event", event["id"], params)

    async def events_since(self, name: str, since: float) -> list[dict[str, Any]]:
        found = await self.db.execute_fetchall(
            "SELECT event_id, name, data_json, ts FROM events WHERE name = ? AND ts >= ? ORDER BY ts",
            (name, r.to_ms(since)),
        )
        return [r.event_from_row(row) for row in found]

    async def get_event(self, event_id: str) -> dict[str, Any] | None:
        found = await self.db.execute_fetchall(
            "SELECT event_id, name, data_json, ts FROM events WHERE event_id = ?", (event_id,)
        )
        return next((r.event_from_row(row) for row in found), None)

    def watch_events(self, listener: Callable[[dict[str, Any]], None]) -> None:
        # One file has no notifications: another process's events are found when a wait
        # reads the journal (at the start of each wait window).
        return None

    # -- sidecar tokens --------------------------------------------------------------------

    async def insert_token(self, token: SidecarToken, secret_hash: bytes) -> None:
        await self._queue("token", token.id, r.token_row(token, secret_hash))

    async def get_token(self, token_id: str) -> SidecarToken | None:
        found = await self.find_token(token_id)
        return None if found is None else found[0]

    async def find_token(self, token_id: str) -> tuple[SidecarToken, bytes] | None:
        found = await self.db.execute_fetchall(
            f"SELECT {r.TOKEN_COLUMNS}, secret_hash FROM sidecar_tokens WHERE token_id = ?", (token_id,)
        )
        for row in found:
            try:
                return r.token_from_row(row), bytes.fromhex(row[-1])
            except ValueError:  # a damaged hash matches nothing
                return None
        return None

    async def list_tokens(self) -> list[SidecarToken]:
        found = await self.db.execute_fetchall(
            f"SELECT {r.TOKEN_COLUMNS} FROM sidecar_tokens ORDER BY created_at DESC"
        )
        return [r.token_from_row(row) for row in found]

    async def revoke_token(self, token_id: str, *, at: float) -> bool:
        revoked: bool = await self._queue("revoke", token_id, (r.to_ms(at), token_id))
        return revoked

    async def count_token_call(self, token_id: str) -> bool:
        allowed: bool = await self._queue("call", None, (token_id,))
        return allowed

    # -- the batch: one transaction, one function in the writer's thread -------------------

    def _execute_batch(self, batch: Sequence[Pending], done: Done) -> None:
        if self._writer is None or self._checkpoints is None:
            raise JournalError("the journal is not open")
        if self._commit_inline(batch):
            done(None)
            return
        self._checkpoints.committed()
        self._writer.submit(lambda db: self._run_batch(db, batch), done)

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
        if len(batch) == 1 and batch[0].kind == "step":
            self._lone_step(db, batch[0])
        else:
            self._run_batch(db, batch)

    def _lone_step(self, db: sqlite3.Connection, pending: Pending) -> None:
        run_id = pending.params[0]
        held = self._held.get(run_id)
        if held is None:
            pending.error = _not_entered(run_id)
        elif not db.execute(stmt.UPSERT_STEP, (*pending.params, run_id, held)).rowcount:
            self._taken_over(db, [pending])

    def _run_batch(self, db: sqlite3.Connection, batch: Sequence[Pending]) -> None:
        by_kind: dict[str, list[Pending]] = {}
        for pending in batch:
            by_kind.setdefault(pending.kind, []).append(pending)
        db.execute("BEGIN IMMEDIATE")
        try:
            for kind, writes in by_kind.items():
                _OPERATIONS[kind](self, db, writes)
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                db.execute("ROLLBACK")
            raise

    def _enter(self, db: sqlite3.Connection, writes: list[Pending]) -> None:
        for pending in writes:
            run_id = pending.params[0]
            taken = db.execute(stmt.ENTER_RUN, pending.params).fetchall()
            if taken:
                pending.result = taken[0][0]
                self._held.take(run_id, pending.result)
                continue
            owner, expires = db.execute(
                "SELECT owner, lease_expires_at FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            pending.error = RunBusyError(run_id, owner, expires / 1000)

    def _steps(self, db: sqlite3.Connection, writes: list[Pending]) -> None:
        fenced: list[tuple[Pending, int]] = []
        for pending in writes:
            held = self._held.get(pending.params[0])
            if held is None:
                pending.error = _not_entered(pending.params[0])
            else:
                fenced.append((pending, held))
        written: set[tuple[str, str]] = set()
        for start in range(0, len(fenced), stmt.ROWS_PER_STATEMENT):
            chunk = fenced[start : start + stmt.ROWS_PER_STATEMENT]
            sql = _upsert_steps(len(chunk))
            params = [value for pending, held in chunk for value in (*pending.params, held)]
            written.update((row[0], row[1]) for row in db.execute(sql, params).fetchall())
        refused = [pending for pending, _ in fenced if (pending.params[0], pending.params[1]) not in written]
        if refused:
            self._taken_over(db, refused)

    def _taken_over(self, db: sqlite3.Connection, refused: list[Pending]) -> None:
        """Refuse step writes the fence turned away: their runs were taken over (say by whom)."""
        fences = self._fences(db, {pending.params[0] for pending in refused})
        for pending in refused:
            current = fences.get(pending.params[0])
            pending.error = RunLeaseLostError(pending.params[0], None if current is None else current[0])

    def _fences(self, db: sqlite3.Connection, run_ids: set[str]) -> dict[str, tuple[str | None, int]]:
        """The current owner and fence of each run, read inside the batch's transaction."""
        ordered, found = sorted(run_ids), {}
        for start in range(0, len(ordered), stmt.ROWS_PER_STATEMENT):
            chunk = ordered[start : start + stmt.ROWS_PER_STATEMENT]
            marks = ", ".join("?" * len(chunk))
            for run_id, owner, fence in db.execute(
                f"SELECT run_id, owner, fence FROM runs WHERE run_id IN ({marks})", chunk
            ):
                found[run_id] = (owner, fence)
        return found

    def _fenced(self, pending: Pending, run_id: str, fences: dict[str, tuple[str | None, int]]) -> bool:
        """Whether this journal still holds ``run_id``; else the write is refused."""
        held = self._held.get(run_id)
        current = fences.get(run_id)
        if held is None:
            pending.error = _not_entered(run_id)
        elif current is None or current[1] != held:
            pending.error = RunLeaseLostError(run_id, None if current is None else current[0])
        return pending.error is None

    def _renew(self, db: sqlite3.Connection, writes: list[Pending]) -> None:
        for pending in writes:
            run_id, expires = pending.params
            fence = self._held.get(run_id)
            params = (expires, run_id, self.owner, fence)
            pending.result = fence is not None and bool(db.execute(stmt.RENEW_RUN, params).fetchall())

    def _release(self, db: sqlite3.Connection, writes: list[Pending]) -> None:
        for pending in writes:
            db.execute(stmt.RELEASE_RUN, (pending.params, self.owner, self._held.get(pending.params)))
            self._held.leave(pending.params)

    def _end(self, db: sqlite3.Connection, writes: list[Pending]) -> None:
        fences = self._fences(db, {pending.params[4] for pending in writes})
        for pending in writes:
            run_id = pending.params[4]
            if self._fenced(pending, run_id, fences):
                db.execute(stmt.END_RUN, (*pending.params, self._held.get(run_id))).fetchall()

    def _simple(self, sql: str, db: sqlite3.Connection, writes: list[Pending]) -> None:
        db.executemany(sql, [pending.params for pending in writes])

    def _returning(self, sql: str, db: sqlite3.Connection, writes: list[Pending]) -> None:
        for pending in writes:
            pending.result = bool(db.execute(sql, pending.params).fetchall())


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


@functools.lru_cache(maxsize=64)
def _upsert_steps(rows: int) -> str:
    """The fenced upsert of ``rows`` steps (built once per size: a lone step is the usual)."""
    head, placeholders, tail = stmt.UPSERT_STEPS
    return f"{head} {', '.join([placeholders] * rows)} {tail}"


_Operation = Callable[[SQLiteJournal, sqlite3.Connection, list[Pending]], None]
_OPERATIONS: dict[str, _Operation] = {
    "enter": SQLiteJournal._enter,
    "step": SQLiteJournal._steps,
    "renew": SQLiteJournal._renew,
    "release": SQLiteJournal._release,
    "end": SQLiteJournal._end,
    "event": lambda journal, db, writes: journal._simple(stmt.RECORD_EVENT, db, writes),
    "token": lambda journal, db, writes: journal._simple(stmt.INSERT_TOKEN, db, writes),
    "revoke": lambda journal, db, writes: journal._returning(stmt.REVOKE_TOKEN, db, writes),
    "call": lambda journal, db, writes: journal._returning(stmt.COUNT_CALL, db, writes),
    "approval": lambda journal, db, writes: APPROVAL_OPERATIONS["approval"](db, writes),
    "decide": lambda journal, db, writes: APPROVAL_OPERATIONS["decide"](db, writes),
}


def _numbered(n: int) -> str:
    return f"?{n}"  # SQLite's numbered parameters: one value may appear twice
