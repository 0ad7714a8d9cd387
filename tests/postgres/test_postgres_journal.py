"""What only the PostgreSQL journal does: its migrations, its URL handling, its connection errors."""

from __future__ import annotations

import asyncio
import contextlib
import secrets

import asyncpg
import pytest

from tests.pg_cluster import running_cluster
from toolbridge import Bridge, JournalError
from toolbridge._journal.base import open_journal
from toolbridge._journal.postgres import PostgresJournal, redact
from toolbridge._journal.postgres.schema import MIGRATIONS
from toolbridge._records import now
from toolbridge._server.sidecar import open_token_store


async def test_daemons_opening_a_new_database_at_once_migrate_it_once(pg_url: str) -> None:
    journals = [open_journal(pg_url) for _ in range(4)]
    await asyncio.gather(*(journal.open() for journal in journals))
    try:
        conn = await asyncpg.connect(pg_url)
        try:
            versions = [row[0] for row in await conn.fetch("SELECT version FROM schema_migrations")]
            tables = {
                row[0]
                for row in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            }
        finally:
            await conn.close()
        assert versions == list(range(1, len(MIGRATIONS) + 1))
        assert {"runs", "steps", "events", "sidecar_tokens", "schema_migrations"} <= tables
    finally:
        await asyncio.gather(*(journal.close() for journal in journals))


async def test_a_database_from_a_newer_toolbridge_is_refused(pg_url: str) -> None:
    journal = open_journal(pg_url)
    await journal.open()
    await journal.close()
    conn = await asyncpg.connect(pg_url)
    try:
        await conn.execute("INSERT INTO schema_migrations VALUES ($1, 0)", len(MIGRATIONS) + 1)
    finally:
        await conn.close()
    with pytest.raises(JournalError, match="newer toolbridge"):
        await open_journal(pg_url).open()


def test_both_url_schemes_open_postgresql_and_other_schemes_are_refused() -> None:
    assert isinstance(open_journal("postgresql://u@h/db"), PostgresJournal)
    assert isinstance(open_journal("postgres://u@h/db"), PostgresJournal)
    with pytest.raises(ValueError, match="unknown journal location 'h/db'"):
        open_journal("mysql://u:secret@h/db")


async def test_an_unreachable_database_is_a_clear_error_without_the_password(pg_cluster: object) -> None:
    url = "postgresql://toolbridge:hunter2@/db?host=/nonexistent-dir&port=5432"
    assert "hunter2" not in redact(url)
    with pytest.raises(JournalError, match="cannot open the PostgreSQL journal") as caught:
        async with Bridge(journal=url):
            pass
    assert "hunter2" not in str(caught.value)


async def test_a_dropped_listen_connection_is_made_again(pg_url: str) -> None:
    sender, receiver = PostgresJournal(pg_url), PostgresJournal(pg_url)
    await sender.open()
    await receiver.open()
    heard = asyncio.Event()
    receiver.watch_events(lambda event: heard.set())
    try:
        listening = receiver._listen
        assert listening is not None
        conn = await asyncpg.connect(pg_url)
        try:  # as a server restart or a dropped network would
            await conn.fetchval("SELECT pg_terminate_backend($1)", listening.get_server_pid())
        finally:
            await conn.close()
        async with asyncio.timeout(10):
            while not heard.is_set():  # until it listens again, events sent meanwhile are missed
                await sender.record_event({"id": secrets.token_hex(8), "name": "n", "data": {}, "ts": now()})
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(heard.wait(), 0.1)
        assert receiver._listen is not listening
    finally:
        await sender.close()
        await receiver.close()


async def test_a_sidecar_token_minted_or_revoked_outlives_a_crash_of_the_server(pg_cluster: object) -> None:
    # A cluster of its own, on disk as in production, its WAL writer at its slowest (10 s): a
    # commit that does not wait for its flush stays in the server's memory, and a crash (an
    # immediate stop) loses it. The journal's durability is "normal" (synchronous_commit=off).
    with running_cluster(durable=True, settings=("wal_writer_delay=10000",)) as cluster:
        url = cluster.create_database()
        async with open_token_store(url) as store:  # as `toolbridge token mint` and `revoke` do
            kept = await store.mint(run_id="r", tools=["t"], max_calls=5, ttl=3600)
            revoked = await store.mint(run_id="r", tools=["t"], max_calls=5, ttl=3600)
            assert await store.revoke(revoked.id)
        assert kept.token is not None
        assert revoked.token is not None
        cluster.restart(crash=True)
        async with open_token_store(url) as store:
            grant = await store.check(kept.token)
            assert grant is not None  # the sandbox holding it gets in
            assert grant.id == kept.id
            assert await store.check(revoked.token) is None  # and the revoked one stays out
