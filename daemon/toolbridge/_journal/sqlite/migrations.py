"""The SQLite schema as numbered migrations, recorded in a table of their own.

``schema_migrations(version, applied_at)`` lists what was applied; the numbers belong to this
dialect (PostgreSQL will number its own). Files from before that table counted their
migrations in ``PRAGMA user_version`` (1 to 3): they are adopted as they stand. The pragma is
still set to the latest version, so that a toolbridge from before this table refuses a newer
file instead of writing seconds into millisecond columns.

Migrating runs in one ``BEGIN IMMEDIATE`` transaction: two processes opening a new file at
once do not both migrate it, and a failed migration leaves the file as it was.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import aiosqlite

from toolbridge._errors import JournalError
from toolbridge._journal.approvals import APPROVALS_MIGRATION
from toolbridge._journal.functions import FUNCTIONS_MIGRATION
from toolbridge._journal.runquery import RUN_SEARCH_MIGRATION
from toolbridge._journal.stepreads import STEP_PAGES_MIGRATION
from toolbridge._records import now

__all__ = ["MIGRATIONS", "migrate"]

_RUNS = """CREATE TABLE {name} (
    run_id      TEXT PRIMARY KEY,
    status      TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    started_at  {time} NOT NULL,
    updated_at  {time} NOT NULL,
    finished_at {time},
    entries     INTEGER NOT NULL DEFAULT 1,
    error       TEXT
)"""
_STEPS = """CREATE TABLE {name} (
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
    started_at      {time} NOT NULL,
    finished_at     {time},
    stale           INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, step_key)
)"""
_EVENTS = """CREATE TABLE {name} (
    event_id  TEXT PRIMARY KEY,
    name      TEXT NOT NULL,
    data_json TEXT NOT NULL,
    ts        {time} NOT NULL
)"""
_TOKENS = """CREATE TABLE {name} (
    token_id    TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    tools_json  TEXT NOT NULL,
    max_calls   INTEGER NOT NULL,
    calls       INTEGER NOT NULL DEFAULT 0,
    created_at  {time} NOT NULL,
    expires_at  {time} NOT NULL,
    revoked_at  {time}
)"""


def _ms(column: str) -> str:
    return f"CAST(ROUND({column} * 1000) AS INTEGER)"


def _rebuild(table: str, ddl: str, columns: str, times: Sequence[str]) -> list[str]:
    """SQLite cannot change a column's type: build the table anew, copy, swap (its recipe)."""
    selected = ", ".join(_ms(c) if c in times else c for c in (part.strip() for part in columns.split(",")))
    return [
        ddl.format(name=f"{table}_new", time="INTEGER"),
        f"INSERT INTO {table}_new ({columns}) SELECT {selected} FROM {table}",
        f"DROP TABLE {table}",
        f"ALTER TABLE {table}_new RENAME TO {table}",
    ]


MIGRATIONS: Sequence[Sequence[str]] = (
    # 1: runs and steps.
    (
        _RUNS.format(name="runs", time="REAL"),
        _STEPS.format(name="steps", time="REAL"),
        "CREATE INDEX steps_by_parent ON steps (run_id, parent_key)",
        "CREATE INDEX runs_by_start ON runs (started_at)",
    ),
    # 2: events, for send_event / wait_for_event and triggered functions.
    (
        _EVENTS.format(name="events", time="REAL"),
        "CREATE INDEX events_by_name ON events (name, ts)",
    ),
    # 3: sidecar tokens (toolbridge serve): only a hash of each secret is kept.
    (_TOKENS.format(name="sidecar_tokens", time="REAL"),),
    # 4: every time as integer epoch milliseconds (REAL seconds before): exact, and portable
    # to PostgreSQL, where REAL is a 4-byte float.
    (
        *_rebuild(
            "runs",
            _RUNS,
            "run_id, status, started_at, updated_at, finished_at, entries, error",
            ("started_at", "updated_at", "finished_at"),
        ),
        *_rebuild(
            "steps",
            _STEPS,
            "run_id, step_key, parent_key, seq, kind, name, idempotency_key, status, input_json, "
            "output_json, error_json, attempts, attempt_log, started_at, finished_at, stale",
            ("started_at", "finished_at"),
        ),
        *_rebuild("events", _EVENTS, "event_id, name, data_json, ts", ("ts",)),
        *_rebuild(
            "sidecar_tokens",
            _TOKENS,
            "token_id, secret_hash, run_id, tools_json, max_calls, calls, created_at, expires_at, revoked_at",
            ("created_at", "expires_at", "revoked_at"),
        ),
        "CREATE INDEX steps_by_parent ON steps (run_id, parent_key)",
        "CREATE INDEX runs_by_start ON runs (started_at)",
        "CREATE INDEX events_by_name ON events (name, ts)",
    ),
    # 5: runs have an owner: the daemon holding the run, until when, and a fence that every
    # takeover increases (step writes are checked against it).
    (
        "ALTER TABLE runs ADD COLUMN owner TEXT",
        "ALTER TABLE runs ADD COLUMN lease_expires_at INTEGER",
        "ALTER TABLE runs ADD COLUMN fence INTEGER NOT NULL DEFAULT 0",
    ),
    # 6: requests for a person's decision, bound to a call (see approvals.py).
    APPROVALS_MIGRATION,
    # 7: a long run is read a page at a time, never whole (see stepreads.py): its steps in
    # order (with their keys, so that paging through keys reads the index alone), and a
    # parent's children in order.
    STEP_PAGES_MIGRATION,
    # 8: finding runs among many (keyset pages, a tool's calls) and who cancelled a run
    # (see runquery.py).
    RUN_SEARCH_MIGRATION,
    # 9: durable functions across daemons: who serves which, and the invocations sent to them
    # (see functions.py).
    FUNCTIONS_MIGRATION,
)

LEGACY_VERSIONS = 3
"""Migrations that files from before ``schema_migrations`` counted in ``PRAGMA user_version``."""


async def migrate(db: aiosqlite.Connection, path: Path) -> None:
    """Bring the file at ``path`` to the latest schema, adopting a ``user_version`` file."""
    if await _up_to_date(db):
        return  # the usual case: no write transaction, so readers (toolbridge trace) never wait
    # Rebuilding a table that others reference needs foreign keys off, and that pragma is
    # a no-op inside a transaction: set it around the transaction.
    await db.execute("PRAGMA foreign_keys=OFF")
    await db.execute("BEGIN IMMEDIATE")
    try:
        await db.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)"
        )
        applied = {row[0] for row in await db.execute_fetchall("SELECT version FROM schema_migrations")}
        if not applied:
            legacy = next(iter(await db.execute_fetchall("PRAGMA user_version")))[0]
            if legacy > LEGACY_VERSIONS:
                raise _newer(path, legacy)
            applied = set(range(1, legacy + 1))
            await _record(db, applied)
        if max(applied, default=0) > len(MIGRATIONS):
            raise _newer(path, max(applied))
        for number, statements in enumerate(MIGRATIONS, start=1):
            if number in applied:
                continue
            try:
                for statement in statements:
                    await db.execute(statement)
            except sqlite3.Error as exc:
                raise JournalError(
                    f"{path}: migration {number} failed, the file is left as it was: {exc}"
                ) from exc
            await _record(db, {number})
        problems = list(await db.execute_fetchall("PRAGMA foreign_key_check"))
        if problems:
            raise JournalError(f"{path}: migrating broke foreign keys: {problems[:3]}")
        await db.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
        await db.execute("COMMIT")
    except BaseException:
        await db.execute("ROLLBACK")
        raise
    finally:
        await db.execute("PRAGMA foreign_keys=ON")


async def _up_to_date(db: aiosqlite.Connection) -> bool:
    table = await db.execute_fetchall(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    )
    if not list(table):
        return False
    versions = {row[0] for row in await db.execute_fetchall("SELECT version FROM schema_migrations")}
    return versions == set(range(1, len(MIGRATIONS) + 1))


async def _record(db: aiosqlite.Connection, versions: set[int]) -> None:
    stamp = round(now() * 1000)
    await db.executemany(
        "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
        [(version, stamp) for version in sorted(versions)],
    )


def _newer(path: Path, version: int) -> JournalError:
    return JournalError(
        f"{path} was written by a newer toolbridge (schema {version}, this one knows "
        f"{len(MIGRATIONS)}); upgrade toolbridge to read it"
    )
