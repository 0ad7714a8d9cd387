"""The SQLite journal on a real file: migrations, group commit, and what a commit guarantees."""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from tests.helpers import WAIT
from toolbridge import JournalError
from toolbridge._journal.commit import Pending
from toolbridge._journal.sqlite import SQLiteJournal
from toolbridge._journal.sqlite.checkpoints import CHECKPOINT_EVERY, LOG_LIMIT
from toolbridge._journal.sqlite.inline import InlineCommits
from toolbridge._journal.sqlite.migrations import MIGRATIONS
from toolbridge._journal.statements import STEP
from toolbridge._records import StepRecord


def step(run_id: str, key: str, seq: int) -> StepRecord:
    return StepRecord(
        run_id=run_id, key=key, parent_key=None, seq=seq, kind="tool", name="t", idempotency_key="k"
    )


async def write_completed(journal: SQLiteJournal, key: str, seq: int, output: str = '"done"') -> None:
    """Write a completed step of run "r" and wait for its commit."""
    rec = step("r", key, seq)
    rec.complete(output)
    await journal.write(rec)


@pytest.fixture
async def journal(journal_path: Path) -> AsyncIterator[SQLiteJournal]:
    """A journal open on a new file, with run "r" entered; closed after the test."""
    opened = SQLiteJournal(journal_path)
    await opened.open()
    try:
        await opened.enter_run("r", lease=30)
        yield opened
    finally:
        await opened.close()


async def test_a_new_journal_is_migrated_to_the_latest_schema(journal_path: Path) -> None:
    journal = SQLiteJournal(journal_path)
    await journal.open()
    await journal.close()
    with sqlite3.connect(journal_path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        applied = [row[0] for row in db.execute("SELECT version FROM schema_migrations ORDER BY version")]
        assert applied == list(range(1, len(MIGRATIONS) + 1))
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"runs", "steps"} <= tables


async def test_reopening_keeps_what_was_written(journal_path: Path) -> None:
    journal = SQLiteJournal(journal_path)
    await journal.open()
    await journal.enter_run("r", lease=30)
    rec = step("r", "a", 1)
    rec.complete('{"x":1}')
    await journal.write(rec)
    await journal.close()
    again = SQLiteJournal(journal_path)
    await again.open()
    try:
        (loaded,) = await again.enter_run("r", lease=30)
        assert (loaded.key, loaded.status, loaded.output_json) == ("a", "completed", '{"x":1}')
        run = await again.get_run("r")
        assert run is not None
        assert run.entries == 2
    finally:
        await again.close()


async def test_a_journal_from_a_newer_version_is_refused(journal_path: Path) -> None:
    journal = SQLiteJournal(journal_path)
    await journal.open()
    await journal.close()
    with sqlite3.connect(journal_path) as db:
        db.execute("INSERT INTO schema_migrations VALUES (?, 0)", (len(MIGRATIONS) + 1,))
    with pytest.raises(JournalError, match="newer toolbridge"):
        await SQLiteJournal(journal_path).open()


async def test_a_user_version_beyond_the_adopted_ones_is_refused(journal_path: Path) -> None:
    with sqlite3.connect(journal_path) as db:  # no schema_migrations: counted by the pragma
        db.execute("PRAGMA user_version = 4")
    with pytest.raises(JournalError, match="newer toolbridge"):
        await SQLiteJournal(journal_path).open()


async def test_a_resolved_write_is_visible_to_another_connection(
    journal: SQLiteJournal,
    journal_path: Path,
) -> None:
    rec = step("r", "a", 1)
    await journal.write(rec)
    with sqlite3.connect(journal_path) as other:
        assert other.execute("SELECT status FROM steps WHERE step_key = 'a'").fetchone() == ("running",)


async def test_concurrent_writes_share_commits_and_the_last_snapshot_wins(journal: SQLiteJournal) -> None:
    statements: list[str] = []
    # Every statement the writer's connection and the loop's own run, as SQLite sees it.
    assert journal._writer is not None
    assert journal._writer.connection is not None
    assert journal._inline is not None
    for connection in (journal._writer.connection, journal._inline._db):
        connection.set_trace_callback(lambda sql: statements.append(sql.split()[0]))
    records = [step("r", f"k{i}", i) for i in range(1200)]  # more rows than one statement holds
    futures = [journal.write(rec) for rec in records]
    records[7].complete('"done"')
    futures.append(journal.write(records[7]))
    await asyncio.gather(*futures)
    # 1201 snapshots in a few multi-row statements, not one each: the first at once on the
    # loop (the journal was idle), the others together, in one transaction
    assert 3 <= statements.count("INSERT") <= 5  # 500 rows a statement
    assert statements.count("BEGIN") == statements.count("COMMIT") <= 3
    loaded = {rec.key: rec for rec in await journal.load_steps("r")}
    assert len(loaded) == 1200
    assert loaded["k7"].status == "completed"
    assert loaded["k8"].status == "running"


async def test_durability_must_be_normal_or_full(journal_path: Path) -> None:
    with pytest.raises(ValueError, match="durability"):
        SQLiteJournal(journal_path, durability="fast")  # type: ignore[arg-type]


async def test_a_writer_cancelled_while_waiting_does_not_break_the_batch(journal: SQLiteJournal) -> None:
    first, second = step("r", "a", 1), step("r", "b", 2)

    async def write_and_wait(rec: StepRecord) -> None:
        await journal.write(rec)

    cancelled = asyncio.create_task(write_and_wait(first))
    kept = asyncio.create_task(write_and_wait(second))
    await asyncio.sleep(0)  # both are waiting on the same commit now
    cancelled.cancel()
    await kept  # the other writer's commit is not cancelled with it
    assert {rec.key for rec in await journal.load_steps("r")} == {"a", "b"}
    # The fixture then closes the journal, which fails unless its flusher is still healthy.


async def test_a_refused_write_fails_its_awaiter_and_one_nobody_awaits_is_not_reported(
    journal_path: Path,
) -> None:
    # A fire-and-forget write's failure must not reach asyncio's "exception was never
    # retrieved" (the refusal is logged once already), and an awaited one must still raise.
    loop = asyncio.get_running_loop()
    reported: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    journal = SQLiteJournal(journal_path)
    await journal.open()
    try:
        forgotten = journal.write(step("never-entered", "a", 1))
        with pytest.raises(JournalError, match="was not entered"):
            await journal.write(step("never-entered", "b", 2))
        assert forgotten.done()
        del forgotten
        gc.collect()  # a future collected with its exception unretrieved is reported here
        await asyncio.sleep(0)  # (the reports are callbacks of the loop)
    finally:
        await journal.close()
        loop.set_exception_handler(None)
    assert reported == []


def log_restarts(journal_path: Path) -> int:
    """How many times the journal's log has started over: the checkpoint sequence number in
    its header (big-endian, bytes 12 to 16), which a commit starting it over increases."""
    with open(f"{journal_path}-wal", "rb") as log:
        return int.from_bytes(log.read(16)[12:16], "big")


def log_frames_written(journal_path: Path) -> int:
    """Pages in the log file, however many of them are old (the file is not cut when the
    log starts over)."""
    return (Path(f"{journal_path}-wal").stat().st_size - 32) // (4096 + 24)


async def checkpoints_done(journal: SQLiteJournal) -> int:
    """Checkpoints finished, once every one started so far has (their thread runs in order)."""
    assert journal._checkpoints is not None
    await journal._checkpoints._thread.run(lambda db: None)
    return journal._checkpoints.done


async def write_until_the_log_starts_over(
    journal: SQLiteJournal, journal_path: Path, times: int, seq: int = 0
) -> int:
    """Write steps one after another (from ``seq + 1`` on) until the log has started over
    ``times`` times; fail after ``20 * CHECKPOINT_EVERY`` writes. Returns the last ``seq``."""
    restarted, last = log_restarts(journal_path), seq + 20 * CHECKPOINT_EVERY
    while log_restarts(journal_path) < restarted + times:
        seq += 1
        assert seq <= last, "the log was not started over"
        await write_completed(journal, f"k{seq}", seq)
        await asyncio.sleep(0)  # a caller's next call comes in a later turn of the loop
    return seq


async def test_a_callers_writes_are_checkpointed_into_the_database_file_and_the_log_starts_over(
    journal: SQLiteJournal,
    journal_path: Path,
) -> None:
    # A caller alone commits each write on the loop, which never checkpoints: unless the
    # checkpoints' thread does, the log takes every page for as long as the daemon runs.
    migrated = journal_path.stat().st_size
    await write_until_the_log_starts_over(journal, journal_path, 2)
    assert await checkpoints_done(journal) >= 2
    assert journal_path.stat().st_size > migrated + 8 * 4096  # the steps' pages, copied


async def test_with_full_durability_every_commit_is_the_writers_and_the_log_starts_over(
    journal_path: Path,
) -> None:
    # durability="full" syncs every commit, so none is made on the loop: the writer's
    # commits are counted for the checkpoints alone.
    journal = SQLiteJournal(journal_path, durability="full")
    await journal.open()
    try:
        assert journal._inline is None
        await journal.enter_run("r", lease=30)
        await write_until_the_log_starts_over(journal, journal_path, 2)
    finally:
        await journal.close()


async def test_the_log_starts_over_while_writes_never_stop(
    journal: SQLiteJournal, journal_path: Path
) -> None:
    # 16 writers at once, each writing again as soon as its write is committed: a passive
    # checkpoint never finds the log copied to its end, and the checkpoint that holds
    # writers off for the last pages starts it over.
    restarted, stop = log_restarts(journal_path), asyncio.Event()
    written = 0

    async def writer(number: int) -> None:
        nonlocal written
        for seq in range(20 * CHECKPOINT_EVERY):
            if stop.is_set():
                return
            await write_completed(journal, f"w{number}-{seq}", seq, '"' + "x" * 500 + '"')
            written += 1
            if log_restarts(journal_path) >= restarted + 2:
                stop.set()

    await asyncio.gather(*(writer(number) for number in range(16)))
    assert stop.is_set(), "the log was not started over"
    with sqlite3.connect(journal_path) as db:
        assert db.execute("SELECT count(*) FROM steps").fetchone()[0] == written


async def test_a_reader_holding_old_pages_keeps_the_log_and_fails_no_write(
    journal: SQLiteJournal, journal_path: Path
) -> None:
    # Another process paging through a trace holds a snapshot: the log cannot start over
    # under it. The checkpoint that would hold writers off gives up after RESTART_WAIT_MS,
    # every write still commits, and the log starts over once the reader is done.
    reader = sqlite3.connect(journal_path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM steps").fetchall()
    restarted = log_restarts(journal_path)
    seq = 0

    async def write() -> None:
        nonlocal seq
        seq += 1
        await write_completed(journal, f"k{seq}", seq)
        await asyncio.sleep(0)

    try:
        while log_frames_written(journal_path) <= LOG_LIMIT + 4 * CHECKPOINT_EVERY:  # past the limit
            await write()
        await checkpoints_done(journal)
        assert log_restarts(journal_path) == restarted
    finally:
        reader.close()
    seq = await write_until_the_log_starts_over(journal, journal_path, 1, seq)  # the reader is done
    with sqlite3.connect(journal_path) as db:
        assert db.execute("SELECT count(*) FROM steps").fetchone()[0] == seq


async def test_no_commit_checkpoints_and_none_waits_for_a_checkpoint(journal: SQLiteJournal) -> None:
    # A checkpoint syncs the log and the file (milliseconds on a disk): inside a commit it
    # held up that commit and every call waiting for it.
    assert journal._writer is not None
    assert journal._inline is not None
    assert journal._checkpoints is not None
    connections = [journal._writer.connection, journal._inline._db]
    assert [db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] for db in connections if db] == [0, 0]
    assert [tuple(row) for row in await journal.db.execute_fetchall("PRAGMA wal_autocheckpoint")] == [(0,)]
    # The checkpoints' thread held as long as a slow disk would hold it: commits, on the loop
    # and in the writer's thread, go on meanwhile.
    release = threading.Event()
    held = journal._checkpoints._thread.run(lambda db: release.wait(WAIT))
    try:
        for seq in range(CHECKPOINT_EVERY + 1):  # lone writes, one of them starting a checkpoint
            await asyncio.wait_for(write_completed(journal, f"h{seq}", seq), WAIT)
        batch = range(CHECKPOINT_EVERY + 1, 3 * CHECKPOINT_EVERY)
        writes = (write_completed(journal, f"h{seq}", seq) for seq in batch)
        await asyncio.wait_for(asyncio.gather(*writes), WAIT)
        assert not held.done()
    finally:
        release.set()
    await held
    assert await checkpoints_done(journal) >= 1


async def test_a_lone_step_on_an_idle_journal_is_one_statement_committed_on_the_loop(
    journal: SQLiteJournal,
    journal_path: Path,
) -> None:
    statements: list[str] = []
    assert journal._inline is not None
    journal._inline._db.set_trace_callback(lambda sql: statements.append(sql.split()[0]))
    rec = step("r", "a", 1)
    rec.complete('"done"')
    await journal.write(rec)
    assert statements == ["INSERT"]  # its own transaction: no BEGIN, no COMMIT around it
    with sqlite3.connect(journal_path) as other:  # committed before the write resolved
        assert other.execute("SELECT output_json FROM steps WHERE step_key = 'a'").fetchone() == ('"done"',)


async def test_journals_opening_one_new_file_at_once_all_open(tmp_path: Path) -> None:
    # Each switches the new file to WAL mode; SQLite refuses all but one of them at once
    # ("database is locked", no busy handler), so the others must try again.
    for attempt in range(30):
        path = tmp_path / f"journal{attempt}.db"
        journals = [SQLiteJournal(path) for _ in range(4)]
        await asyncio.gather(*(journal.open() for journal in journals))
        for journal in journals:
            await journal.close()


def test_the_loops_connection_hands_a_batch_it_could_not_lock_to_the_writer(journal_path: Path) -> None:
    # A lone step is a deferred transaction: besides SQLITE_BUSY, SQLite may answer
    # SQLITE_BUSY_SNAPSHOT (another connection committed since it began reading), an
    # extended code whose low byte is SQLITE_BUSY. Either way the batch goes to the writer.
    inline = InlineCommits(journal_path)
    try:
        for code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_BUSY | 2 << 8, sqlite3.SQLITE_LOCKED):

            def refused(db: sqlite3.Connection, batch: Sequence[Pending], code: int = code) -> None:
                exc = sqlite3.OperationalError("database is locked")
                exc.sqlite_errorcode = code
                raise exc

            assert inline.commit(refused, [Pending(STEP, ("r", "a"), ())]) is False

        def broken(db: sqlite3.Connection, batch: Sequence[Pending]) -> None:
            exc = sqlite3.OperationalError("no such table: steps")
            exc.sqlite_errorcode = sqlite3.SQLITE_ERROR
            raise exc

        with pytest.raises(sqlite3.OperationalError, match="no such table"):  # not a lock: the batch fails
            inline.commit(broken, [Pending(STEP, ("r", "a"), ())])
    finally:
        inline.close()
