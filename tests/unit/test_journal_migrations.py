"""A journal file made by an older toolbridge (REAL seconds, ``PRAGMA user_version`` 3) migrates."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from toolbridge import JournalError
from toolbridge._journal.sqlite import SQLiteJournal
from toolbridge._journal.sqlite.migrations import MIGRATIONS

# The schema as toolbridge wrote it before schema_migrations and integer milliseconds.
OLD_SCHEMA = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    started_at REAL NOT NULL, updated_at REAL NOT NULL, finished_at REAL,
    entries INTEGER NOT NULL DEFAULT 1, error TEXT
);
CREATE TABLE steps (
    run_id TEXT NOT NULL REFERENCES runs (run_id), step_key TEXT NOT NULL, parent_key TEXT,
    seq INTEGER NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL, idempotency_key TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    input_json TEXT, output_json TEXT, error_json TEXT, attempts INTEGER NOT NULL DEFAULT 0,
    attempt_log TEXT NOT NULL DEFAULT '[]', started_at REAL NOT NULL, finished_at REAL,
    stale INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (run_id, step_key)
);
CREATE INDEX steps_by_parent ON steps (run_id, parent_key);
CREATE INDEX runs_by_start ON runs (started_at);
CREATE TABLE events (
    event_id TEXT PRIMARY KEY, name TEXT NOT NULL, data_json TEXT NOT NULL, ts REAL NOT NULL
);
CREATE INDEX events_by_name ON events (name, ts);
CREATE TABLE sidecar_tokens (
    token_id TEXT PRIMARY KEY, secret_hash TEXT NOT NULL, run_id TEXT NOT NULL,
    tools_json TEXT NOT NULL, max_calls INTEGER NOT NULL, calls INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL, expires_at REAL NOT NULL, revoked_at REAL
);
PRAGMA user_version = 3;
"""


def old_journal(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.executescript(OLD_SCHEMA)
        db.execute(
            "INSERT INTO runs VALUES "
            "('order-1', 'completed', 1700000000.25, 1700000002.5, 1700000002.5, 1, NULL)"
        )
        db.execute(
            "INSERT INTO steps VALUES ('order-1', 'charge', NULL, 1, 'tool', 'charge', 'tbk_1', "
            "'completed', '{}', '{\"ok\":true}', NULL, 1, '[]', 1700000000.5, 1700000001.7505, 0)"
        )
        db.execute("INSERT INTO events VALUES ('evt_1', 'paid', '{}', 1700000001.0)")
        db.execute(
            "INSERT INTO sidecar_tokens VALUES ('t1', 'abcd', 'vm', '[\"lookup\"]', 5, 2, "
            "1700000000.0, 1700003600.0, NULL)"
        )


async def test_an_old_journal_is_adopted_and_its_times_become_milliseconds(journal_path: Path) -> None:
    old_journal(journal_path)
    journal = SQLiteJournal(journal_path)
    await journal.open()
    try:
        run = await journal.get_run("order-1")
        assert run is not None
        assert (run.started_at, run.finished_at, run.steps, run.status) == (
            1700000000.25,
            1700000002.5,
            1,
            "completed",
        )
        assert (run.owner, run.lease_expires_at, run.fence) == (None, None, 0)
        (charge,) = await journal.load_steps("order-1")
        assert (charge.started_at, charge.finished_at, charge.output_json) == (
            1700000000.5,
            1700000001.751,
            '{"ok":true}',
        )
        assert [e["ts"] for e in await journal.events_since("paid", 1700000000.0)] == [1700000001.0]
        found = await journal.get_token("t1")
        assert found is not None
        assert (found.calls, found.created_at, found.expires_at) == (2, 1700000000.0, 1700003600.0)
        # The migrated run is entered like any other: the first holder takes fence 1.
        (replayed,) = await journal.enter_run("order-1", lease=30)
        assert replayed.key == "charge"
        entered = await journal.get_run("order-1")
        assert entered is not None
        assert (entered.owner, entered.fence) == (journal.owner, 1)
    finally:
        await journal.close()
    with sqlite3.connect(journal_path) as db:
        versions = [row[0] for row in db.execute("SELECT version FROM schema_migrations ORDER BY version")]
        assert versions == list(range(1, len(MIGRATIONS) + 1))
        # A toolbridge from before schema_migrations reads this pragma, and refuses the file.
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        types = {row[1]: row[2] for row in db.execute("PRAGMA table_info(steps)")}
        assert (types["started_at"], types["finished_at"]) == ("INTEGER", "INTEGER")
        assert db.execute("SELECT typeof(started_at) FROM steps").fetchone() == ("integer",)
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        indexes = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"steps_by_parent", "runs_by_start", "events_by_name"} <= indexes


async def test_a_failed_migration_leaves_the_file_as_it_was(journal_path: Path) -> None:
    old_journal(journal_path)
    with sqlite3.connect(journal_path) as db:
        db.execute("CREATE TABLE runs_new (x)")  # in the way of migration 4's rebuild
    with pytest.raises(
        JournalError, match=r"migration 4 failed, the file is left as it was: .*already exists"
    ):
        await SQLiteJournal(journal_path).open()
    with sqlite3.connect(journal_path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 3
        assert db.execute("SELECT typeof(started_at) FROM runs").fetchone() == ("real",)
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "schema_migrations" not in tables
