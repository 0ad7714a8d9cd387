"""The PostgreSQL write path: a batch of steps is one fenced statement, on a connection of its own.

A batch of step snapshots alone is a single statement in its own transaction (no BEGIN, no
COMMIT, no separate read of the fences): these tests prove that it still waits for a takeover
in progress and refuses the old holder's rows once the takeover commits, and that the
connection batches commit on (outside the pool) is made again when it drops.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from toolbridge._errors import JournalError, RunLeaseLostError
from toolbridge._journal.postgres import PostgresJournal
from toolbridge._records import StepRecord

WAITING_ON_A_LOCK = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
)


def step(key: str) -> StepRecord:
    rec = StepRecord(run_id="r", key=key, parent_key=None, seq=1, kind="tool", name="t", idempotency_key="k")
    rec.complete('"done"')
    return rec


async def until_a_backend_waits_on_a_lock(conn: asyncpg.Connection) -> None:
    async with asyncio.timeout(30):
        while not await conn.fetchval(WAITING_ON_A_LOCK):  # noqa: ASYNC110 - nothing announces it
            await asyncio.sleep(0.01)


async def test_a_step_write_racing_a_takeover_waits_for_it_then_is_refused(pg_url: str) -> None:
    journal = PostgresJournal(pg_url, owner="a")
    await journal.open()
    other = await asyncpg.connect(pg_url)
    try:
        await journal.enter_run("r", lease=30)
        await journal.write(step("before"))
        # Another daemon's takeover, caught between its update of the run and its commit.
        takeover = other.transaction()
        await takeover.start()
        await other.execute("UPDATE runs SET owner = 'b', fence = fence + 1 WHERE run_id = 'r'")
        late = asyncio.ensure_future(journal.write(step("late")))
        # The write cannot read the run's fence before the takeover ends: it waits for it. (A
        # read of the fence from the statement's snapshot would write the row now.)
        await until_a_backend_waits_on_a_lock(other)
        assert not late.done()
        await takeover.commit()
        with pytest.raises(RunLeaseLostError, match="taken over by b"):
            await late
        keys = [row[0] for row in await other.fetch("SELECT step_key FROM steps WHERE run_id = 'r'")]
        assert keys == ["before"]
    finally:
        await other.close()
        await journal.close()


async def test_the_commit_connection_is_made_again_after_it_drops(pg_url: str) -> None:
    journal = PostgresJournal(pg_url, owner="a")
    await journal.open()
    other = await asyncpg.connect(pg_url)
    try:
        await journal.enter_run("r", lease=30)
        await journal.write(step("before"))
        # The server ends the backend of a commit in flight (a restart, a network drop). The
        # commit is held on a lock first, so that it is surely sent: a drop seen before the
        # write would only have it sent on a new connection.
        hold = other.transaction()
        await hold.start()
        await other.execute("LOCK TABLE runs IN EXCLUSIVE MODE")
        lost = asyncio.ensure_future(journal.write(step("lost")))
        await until_a_backend_waits_on_a_lock(other)
        writer = await other.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        assert await other.fetchval("SELECT pg_terminate_backend($1, 30000)", writer)
        await hold.rollback()
        with pytest.raises(JournalError):  # the write on the dropped connection fails, unanswered
            await lost
        await journal.write(step("after"))  # and the next one commits on a new connection
        keys = sorted(row[0] for row in await other.fetch("SELECT step_key FROM steps WHERE run_id = 'r'"))
        assert keys == ["after", "before"]
    finally:
        await other.close()
        await journal.close()
