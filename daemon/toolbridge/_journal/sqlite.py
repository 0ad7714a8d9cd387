"""The journal: every run and step, in SQLite.

The journal is the source of truth for replay and the trace. Writes are group-committed: all
step snapshots queued while one commit runs go into the next one together, as a single
multi-row upsert statement, which SQLite runs as one transaction that takes the write lock at
once (what ``BEGIN IMMEDIATE`` does for a multi-statement transaction). Concurrent calls share
a commit, and a lone call pays for one thread hop to aiosqlite's writer thread.

Durability: WAL mode. With ``durability="normal"`` (``synchronous=NORMAL``, the default) a
committed step survives the daemon being killed at any point; a power loss or kernel crash
may lose the last commits. ``durability="full"`` (``synchronous=FULL``) survives those too,
at the cost of an fsync per commit.

The SQL sticks to what SQLite and PostgreSQL share (``ON CONFLICT ... DO UPDATE``, plain
types), so the same schema can move to PostgreSQL when one machine is outgrown.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import aiosqlite

from toolbridge._errors import JournalError
from toolbridge._journal.approvals import (
    APPROVALS_MIGRATION,
    RUN_STATUS_SQL,
    ApprovalStore,
    MemoryApprovals,
    SQLiteApprovals,
)
from toolbridge._records import RunStatus, RunSummary, StepRecord, now

Durability = Literal["normal", "full"]
log = logging.getLogger("toolbridge")

# Numbered migrations; the database's `PRAGMA user_version` is the last one applied.
MIGRATIONS: Sequence[str] = (
    # 1: runs and steps.
    """
    CREATE TABLE runs (
        run_id      TEXT PRIMARY KEY,
        status      TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
        started_at  REAL NOT NULL,
        updated_at  REAL NOT NULL,
        finished_at REAL,
        entries     INTEGER NOT NULL DEFAULT 1,
        error       TEXT
    );
    CREATE TABLE steps (
        run_id          TEXT NOT NULL REFERENCES runs (run_id),
        step_key        TEXT NOT NULL,
        parent_key      TEXT,
        seq             INTEGER NOT NULL,
        kind            TEXT NOT NULL,
        name            TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        status          TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
        input_json      TEXT,
        output_json     TEXT,
        error_json      TEXT,
        attempts        INTEGER NOT NULL DEFAULT 0,
        attempt_log     TEXT NOT NULL DEFAULT '[]',
        started_at      REAL NOT NULL,
        finished_at     REAL,
        stale           INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (run_id, step_key)
    );
    CREATE INDEX steps_by_parent ON steps (run_id, parent_key);
    CREATE INDEX runs_by_start ON runs (started_at);
    """,
    # 2: events, for send_event / wait_for_event and triggered functions.
    """
    CREATE TABLE events (
        event_id  TEXT PRIMARY KEY,
        name      TEXT NOT NULL,
        data_json TEXT NOT NULL,
        ts        REAL NOT NULL
    );
    CREATE INDEX events_by_name ON events (name, ts);
    """,
    # 3: sidecar tokens (toolbridge serve): only a hash of each secret is kept.
    """
    CREATE TABLE sidecar_tokens (
        token_id    TEXT PRIMARY KEY,
        secret_hash TEXT NOT NULL,
        run_id      TEXT NOT NULL,
        tools_json  TEXT NOT NULL,
        max_calls   INTEGER NOT NULL,
        calls       INTEGER NOT NULL DEFAULT 0,
        created_at  REAL NOT NULL,
        expires_at  REAL NOT NULL,
        revoked_at  REAL
    );
    """,
    # 4: requests for a person's decision (see approvals.py).
    APPROVALS_MIGRATION,
)

_ROWS_PER_STATEMENT = 500  # 16 columns x 500 rows stays far below SQLite's 32766 parameters


@dataclass(frozen=True)
class _Statement:
    """A write the journal batches. With ``upsert_rows``, many rows go into one statement.

    A single multi-row ``INSERT ... ON CONFLICT DO UPDATE`` is one implicit transaction that
    takes the write lock at once (as BEGIN IMMEDIATE would) and costs one thread hop on
    aiosqlite, however many rows a batch holds.
    """

    sql: str
    multi_row: tuple[str, str, str] | None = None  # (head, one row's placeholders, tail)

    def render(self, rows: list[tuple[Any, ...]]) -> list[tuple[str, tuple[Any, ...]]]:
        if self.multi_row is None:
            return [(self.sql, row) for row in rows]
        head, placeholders, tail = self.multi_row
        rendered = []
        for start in range(0, len(rows), _ROWS_PER_STATEMENT):
            chunk = rows[start : start + _ROWS_PER_STATEMENT]
            sql = f"{head} {', '.join([placeholders] * len(chunk))} {tail}"
            rendered.append((sql, tuple(value for row in chunk for value in row)))
        return rendered


_STEP_COLUMNS = (
    "run_id, step_key, parent_key, seq, kind, name, idempotency_key, status, input_json, "
    "output_json, error_json, attempts, attempt_log, started_at, finished_at, stale"
)
_UPSERT_STEP = _Statement(
    sql="",
    multi_row=(
        f"INSERT INTO steps ({_STEP_COLUMNS}) VALUES",
        f"({', '.join('?' * 16)})",
        """ON CONFLICT (run_id, step_key) DO UPDATE SET
            status = excluded.status, input_json = excluded.input_json,
            output_json = excluded.output_json, error_json = excluded.error_json,
            attempts = excluded.attempts, attempt_log = excluded.attempt_log,
            finished_at = excluded.finished_at, stale = excluded.stale""",
    ),
)
_ENTER_RUN = _Statement("""
    INSERT INTO runs (run_id, status, started_at, updated_at) VALUES (?, 'running', ?, ?)
    ON CONFLICT (run_id) DO UPDATE SET
        status = 'running', updated_at = excluded.updated_at, finished_at = NULL,
        error = NULL, entries = runs.entries + 1
""")
_RECORD_EVENT = _Statement("INSERT INTO events (event_id, name, data_json, ts) VALUES (?, ?, ?, ?)")
_END_RUN = _Statement(
    "UPDATE runs SET status = ?, updated_at = ?, finished_at = ?, error = ? WHERE run_id = ?"
)


def _step_row(rec: StepRecord) -> tuple[Any, ...]:
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
        rec.started_at,
        rec.finished_at,
        int(rec.stale),
    )


def _step_from_row(row: Sequence[Any]) -> StepRecord:
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
        started_at=row[13],
        finished_at=row[14],
        stale=bool(row[15]),
    )


class Journal(Protocol):
    """Where runs and steps are recorded. :class:`SQLiteJournal` is the real one."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def enter_run(self, run_id: str) -> list[StepRecord]:
        """Mark the run running (creating it if new) and return its recorded steps."""
        ...

    def write(self, rec: StepRecord) -> asyncio.Future[None]:
        """Queue a snapshot of ``rec``; the future resolves once it is committed."""
        ...

    async def end_run(self, run_id: str, status: RunStatus, error: str | None = None) -> None: ...

    async def record_event(self, event: dict[str, Any]) -> None:
        """Journal an event; returns once it is committed."""
        ...

    async def events_since(self, name: str, since: float) -> list[dict[str, Any]]:
        """Events named ``name`` sent at or after ``since``, oldest first."""
        ...

    async def list_runs(self, limit: int = 50) -> list[RunSummary]: ...

    async def load_steps(self, run_id: str) -> list[StepRecord]: ...

    async def get_run(self, run_id: str) -> RunSummary | None: ...

    @property
    def approvals(self) -> ApprovalStore:
        """Requests for a person's decision (:mod:`approvals`)."""
        ...


class _GroupCommit:
    """Queues writes and commits everything queued during the previous commit together."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db
        # statement -> (row key -> params): the last snapshot of a row wins within a batch,
        # which also keeps a multi-row upsert from touching one row twice.
        self._pending: dict[_Statement, dict[Any, tuple[Any, ...]]] = {}
        self._batch: asyncio.Future[None] | None = None
        self._flusher: asyncio.Task[None] | None = None

    def add(self, statement: _Statement, key: Any, params: tuple[Any, ...]) -> asyncio.Future[None]:
        self._pending.setdefault(statement, {})[key] = params
        loop = asyncio.get_running_loop()
        if self._batch is None:
            self._batch = loop.create_future()
            # Nobody may await a fire-and-forget write; never let its failure go unheard.
            self._batch.add_done_callback(_consume_exception)
        if self._flusher is None or self._flusher.done():
            self._flusher = loop.create_task(self._flush())
        # The batch is shared by every write in it: a writer that is cancelled while it waits
        # must cancel its own wait, never the batch the others wait on.
        waiter = asyncio.shield(self._batch)
        waiter.add_done_callback(_consume_exception)
        return waiter

    async def _flush(self) -> None:
        while self._pending:
            pending, batch = self._pending, self._batch
            self._pending, self._batch = {}, None
            assert batch is not None
            try:
                for statement, rows in pending.items():
                    for sql, params in statement.render(list(rows.values())):
                        await self._db.execute(sql, params)
            except Exception as exc:
                log.error("journal write failed: %s", exc)
                batch.set_exception(JournalError(f"journal write failed: {exc}"))
            else:
                batch.set_result(None)

    async def drain(self) -> None:
        while self._flusher is not None and not self._flusher.done():
            await asyncio.shield(self._flusher)


def _consume_exception(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


class SQLiteJournal:
    """The journal in one SQLite file (WAL mode, numbered migrations, group commit).

    Args:
        path: The database file; created with its schema when missing.
        durability: ``"normal"`` survives a killed process, ``"full"`` a power loss too.
    """

    def __init__(self, path: str | os.PathLike[str], *, durability: Durability = "normal") -> None:
        if durability not in ("normal", "full"):
            raise ValueError("durability must be 'normal' or 'full'")
        self.path = Path(path)
        self._durability = durability
        self._db: aiosqlite.Connection | None = None
        self._commits: _GroupCommit | None = None
        self.approvals = SQLiteApprovals(lambda: self.db)

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise JournalError("the journal is not open")
        return self._db

    async def open(self) -> None:
        # Autocommit: every write is one statement and so one transaction (see _Statement);
        # migrations, which need several statements, use an explicit BEGIN IMMEDIATE.
        self._db = await aiosqlite.connect(self.path, isolation_level=None)
        try:
            await self._db.execute("PRAGMA journal_mode=WAL")
            await self._db.execute(f"PRAGMA synchronous={self._durability.upper()}")
            await self._db.execute("PRAGMA busy_timeout=5000")
            await self._db.execute("PRAGMA foreign_keys=ON")
            await self._migrate()
        except BaseException:
            await self._db.close()
            self._db = None
            raise
        self._commits = _GroupCommit(self._db)

    async def _migrate(self) -> None:
        async with self.db.execute("PRAGMA user_version") as cursor:
            row = await cursor.fetchone()
        version = int(row[0]) if row else 0
        if version > len(MIGRATIONS):
            raise JournalError(
                f"{self.path} was written by a newer toolbridge (schema {version}, this one "
                f"knows {len(MIGRATIONS)}); upgrade toolbridge to read it"
            )
        for number in range(version + 1, len(MIGRATIONS) + 1):
            # executescript commits first and runs outside the implicit transaction, so
            # wrap each migration and its version bump in one explicit transaction.
            await self.db.executescript(
                f"BEGIN IMMEDIATE;\n{MIGRATIONS[number - 1]}\nPRAGMA user_version = {number};\nCOMMIT;"
            )

    async def close(self) -> None:
        if self._db is None:
            return
        commits, self._commits = self._commits, None  # later writes fail at once, not in a flush
        if commits is not None:
            await commits.drain()
        await self._db.close()
        self._db = None

    async def enter_run(self, run_id: str) -> list[StepRecord]:
        stamp = now()
        await self._group_commit().add(_ENTER_RUN, ("run", run_id), (run_id, stamp, stamp))
        return await self.load_steps(run_id)

    def _group_commit(self) -> _GroupCommit:
        if self._commits is None:
            raise JournalError("the journal is not open")
        return self._commits

    def write(self, rec: StepRecord) -> asyncio.Future[None]:
        return self._group_commit().add(_UPSERT_STEP, (rec.run_id, rec.key), _step_row(rec))

    def execute(self, sql: str, params: tuple[Any, ...], *, key: Any) -> asyncio.Future[None]:
        """Queue a statement on another table into the group commit.

        Statements with the same ``sql`` and ``key`` queued before one commit collapse into
        the last one. The future resolves once it is committed.
        """
        return self._group_commit().add(_Statement(sql), key, params)

    async def end_run(self, run_id: str, status: RunStatus, error: str | None = None) -> None:
        stamp = now()
        await self._group_commit().add(_END_RUN, ("run", run_id), (status, stamp, stamp, error, run_id))

    async def record_event(self, event: dict[str, Any]) -> None:
        params = (event["id"], event["name"], json.dumps(event["data"]), event["ts"])
        await self._group_commit().add(_RECORD_EVENT, event["id"], params)

    async def events_since(self, name: str, since: float) -> list[dict[str, Any]]:
        async with self.db.execute(
            "SELECT event_id, name, data_json, ts FROM events WHERE name = ? AND ts >= ? ORDER BY ts",
            (name, since),
        ) as cursor:
            rows = await cursor.fetchall()
        return [{"id": row[0], "name": row[1], "data": json.loads(row[2]), "ts": row[3]} for row in rows]

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        async with self.db.execute(
            f"SELECT {_STEP_COLUMNS} FROM steps WHERE run_id = ? ORDER BY seq", (run_id,)
        ) as cursor:
            return [_step_from_row(row) for row in await cursor.fetchall()]

    async def list_runs(self, limit: int = 50) -> list[RunSummary]:
        return await self._runs("ORDER BY r.started_at DESC LIMIT ?", (limit,))

    async def get_run(self, run_id: str) -> RunSummary | None:
        found = await self._runs("WHERE r.run_id = ?", (run_id,))
        return found[0] if found else None

    async def _runs(self, where: str, params: tuple[Any, ...]) -> list[RunSummary]:
        sql = (
            f"SELECT r.run_id, {RUN_STATUS_SQL}, r.started_at, r.updated_at, r.finished_at, r.entries, "
            "(SELECT COUNT(*) FROM steps s WHERE s.run_id = r.run_id), r.error "
            f"FROM runs r {where}"
        )
        async with self.db.execute(sql, params) as cursor:
            return [RunSummary(*row) for row in await cursor.fetchall()]


class NullJournal:
    """Records nothing: no replay, no trace. For measuring what journaling costs.

    Requests for a person's decision are kept in memory, so that they work in-process.
    """

    def __init__(self) -> None:
        self.approvals = MemoryApprovals()

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def enter_run(self, run_id: str) -> list[StepRecord]:
        return []

    def write(self, rec: StepRecord) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

    async def end_run(self, run_id: str, status: RunStatus, error: str | None = None) -> None:
        return None

    async def list_runs(self, limit: int = 50) -> list[RunSummary]:
        return []

    async def record_event(self, event: dict[str, Any]) -> None:
        return None

    async def events_since(self, name: str, since: float) -> list[dict[str, Any]]:
        return []

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        return []

    async def get_run(self, run_id: str) -> RunSummary | None:
        return None
