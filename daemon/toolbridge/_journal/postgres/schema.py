"""The PostgreSQL schema as numbered migrations, recorded in ``schema_migrations``.

The numbers belong to this dialect: PostgreSQL journals start at the schema SQLite files
reached after their own migrations (integer epoch milliseconds, run owners and fences), so
migration 1 here is that whole schema. The columns are the same names and portable types as
SQLite's (``BIGINT`` milliseconds, ``TEXT``, JSON as ``TEXT``), so the rows convert the same
way (:mod:`.rows`) and one conformance suite runs against both.

Several daemons may open a new database at once: migrating takes a transaction-scoped
advisory lock first, so exactly one of them creates the tables and the others find them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from toolbridge._errors import JournalError
from toolbridge._journal import approvals, functions
from toolbridge._journal.runquery import RUN_SEARCH_MIGRATION
from toolbridge._journal.stepreads import STEP_PAGES_MIGRATION

__all__ = ["MIGRATIONS", "migrate"]

# The same table as SQLite's, but a PostgreSQL INTEGER is four bytes: too small for epoch ms.
APPROVALS_MIGRATION = tuple(re.sub(r"\bINTEGER\b", "BIGINT", sql) for sql in approvals.APPROVALS_MIGRATION)
FUNCTIONS_MIGRATION = tuple(re.sub(r"\bINTEGER\b", "BIGINT", sql) for sql in functions.FUNCTIONS_MIGRATION)

_LOCK = 0x746F6F6C62  # "toolb": the advisory lock key that serializes migrations

MIGRATIONS: Sequence[Sequence[str]] = (
    # 1: runs (with their owner, lease and fence), steps, events, sidecar tokens.
    (
        """CREATE TABLE runs (
            run_id           TEXT PRIMARY KEY,
            status           TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
            started_at       BIGINT NOT NULL,
            updated_at       BIGINT NOT NULL,
            finished_at      BIGINT,
            entries          INTEGER NOT NULL DEFAULT 1,
            error            TEXT,
            owner            TEXT,
            lease_expires_at BIGINT,
            fence            BIGINT NOT NULL DEFAULT 0
        )""",
        """CREATE TABLE steps (
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
            started_at      BIGINT NOT NULL,
            finished_at     BIGINT,
            stale           INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (run_id, step_key)
        )""",
        "CREATE INDEX steps_by_parent ON steps (run_id, parent_key)",
        "CREATE INDEX runs_by_start ON runs (started_at)",
        # Recovery looks for running runs whose lease ran out.
        "CREATE INDEX runs_by_lease ON runs (lease_expires_at) WHERE status = 'running'",
        """CREATE TABLE events (
            event_id  TEXT PRIMARY KEY,
            name      TEXT NOT NULL,
            data_json TEXT NOT NULL,
            ts        BIGINT NOT NULL
        )""",
        "CREATE INDEX events_by_name ON events (name, ts)",
        """CREATE TABLE sidecar_tokens (
            token_id    TEXT PRIMARY KEY,
            secret_hash TEXT NOT NULL,
            run_id      TEXT NOT NULL,
            tools_json  TEXT NOT NULL,
            max_calls   INTEGER NOT NULL,
            calls       INTEGER NOT NULL DEFAULT 0,
            created_at  BIGINT NOT NULL,
            expires_at  BIGINT NOT NULL,
            revoked_at  BIGINT
        )""",
    ),
    # 2: requests for a person's decision, bound to a call (see approvals.py).
    APPROVALS_MIGRATION,
    # 3: a long run is read a page at a time (see stepreads.py).
    STEP_PAGES_MIGRATION,
    # 4: finding runs among many (keyset pages, a tool's calls) and who cancelled a run
    # (see runquery.py).
    RUN_SEARCH_MIGRATION,
    # 5: durable functions across daemons: who serves which, and the invocations sent to them
    # (see functions.py).
    FUNCTIONS_MIGRATION,
)


async def migrate(conn: asyncpg.Connection | PoolConnectionProxy, where: str) -> None:
    """Bring the database to the latest schema, in one transaction.

    Raises:
        JournalError: when a newer toolbridge wrote the database.
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)"
        )
        applied = {row[0] for row in await conn.fetch("SELECT version FROM schema_migrations")}
        if max(applied, default=0) > len(MIGRATIONS):
            raise JournalError(
                f"{where} was written by a newer toolbridge (schema {max(applied)}, this one knows "
                f"{len(MIGRATIONS)}); upgrade toolbridge to use it"
            )
        for number, statements in enumerate(MIGRATIONS, start=1):
            if number in applied:
                continue
            for statement in statements:
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO schema_migrations (version, applied_at) "
                "VALUES ($1, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)",
                number,
            )
