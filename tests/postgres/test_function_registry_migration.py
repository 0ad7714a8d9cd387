"""A journal written before the registry of served functions gains it when it is next opened.

On each dialect: a journal at the schema before this migration (made by opening a fresh one
and taking the migration back out) is opened by this toolbridge, which applies the one
migration it lacks; the registry then works and the older rows are untouched.
"""

from __future__ import annotations

import sqlite3

import asyncpg

from toolbridge._journal.base import open_journal
from toolbridge._journal.functions import ServedFunction
from toolbridge._journal.postgres import schema as pg_schema
from toolbridge._journal.sqlite import migrations as sqlite_schema

UNDO = ("DROP TABLE function_servers", "DROP TABLE invocations")


async def test_a_journal_from_before_the_registry_is_migrated_when_opened(journal_url: str) -> None:
    journal = open_journal(journal_url)
    await journal.open()
    try:
        await journal.enter_run("older", lease=30)
        await journal.release_run("older")
    finally:
        await journal.close()
    if journal_url.startswith("postgresql://"):
        latest = len(pg_schema.MIGRATIONS)
        conn = await asyncpg.connect(journal_url)
        try:
            for statement in UNDO:
                await conn.execute(statement)
            await conn.execute("DELETE FROM schema_migrations WHERE version = $1", latest)
        finally:
            await conn.close()
    else:
        latest = len(sqlite_schema.MIGRATIONS)
        with sqlite3.connect(journal_url) as db:
            for statement in UNDO:
                db.execute(statement)
            db.execute("DELETE FROM schema_migrations WHERE version = ?", (latest,))
            db.execute(f"PRAGMA user_version = {latest - 1}")

    reopened = open_journal(journal_url, owner="host-b:2:b")
    await reopened.open()
    try:
        await reopened.functions.register([ServedFunction(id="refund", event_name="invoke/refund")], ttl=30)
        assert [s.owner for s in await reopened.functions.servers("refund")] == ["host-b:2:b"]
        older = await reopened.get_run("older")
        assert older is not None
        assert older.status == "running"
    finally:
        await reopened.close()
