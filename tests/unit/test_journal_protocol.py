"""The SQLite journal through the ``Journal`` protocol: tokens, budgets, leases, fences, times."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from toolbridge import JournalError, RunBusyError, RunLeaseLostError, SidecarToken
from toolbridge._journal.base import Journal, open_journal
from toolbridge._journal.null import NullJournal
from toolbridge._journal.postgres import PostgresJournal
from toolbridge._journal.sqlite import SQLiteJournal
from toolbridge._records import StepRecord

LEASE = 30.0


def step(run_id: str, key: str, seq: int, output: str | None = None) -> StepRecord:
    rec = StepRecord(
        run_id=run_id, key=key, parent_key=None, seq=seq, kind="tool", name="t", idempotency_key="k"
    )
    if output is not None:
        rec.complete(output)
    return rec


@pytest.fixture
async def journals(journal_path: Path) -> AsyncIterator[Callable[[], Journal]]:
    """Opened journals on one file, as two daemons would have them; all closed at the end."""
    opened: list[Journal] = []

    def make() -> Journal:
        journal = open_journal(journal_path)
        opened.append(journal)
        return journal

    try:
        yield make
    finally:
        for journal in opened:
            await journal.close()


class Clock:
    """The journal's clock, moved by the test: a lease expires without waiting for it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1_800_000_000.0
        monkeypatch.setattr("toolbridge._journal.sqlite.now", lambda: self.now)


def token(token_id: str = "t1", *, max_calls: int = 3) -> SidecarToken:
    return SidecarToken(
        id=token_id,
        run_id="vm",
        tools=("lookup",),
        max_calls=max_calls,
        calls=0,
        created_at=1_800_000_000.123,
        expires_at=1_800_000_600.456,
    )


def test_open_journal_picks_the_implementation_by_location(tmp_path: Path) -> None:
    assert isinstance(open_journal(tmp_path / "j.db"), SQLiteJournal)
    assert isinstance(open_journal(str(tmp_path / "j.db")), SQLiteJournal)
    assert isinstance(open_journal(None), NullJournal)
    for url in ("postgresql://u:secret@db/toolbridge", "postgres://db/toolbridge"):
        assert isinstance(open_journal(url), PostgresJournal)  # not opened: nothing connects
    with pytest.raises(ValueError, match="unknown journal location") as caught:
        open_journal("mysql://u:secret@db")
    assert "secret" not in str(caught.value)


async def test_tokens_are_stored_found_listed_and_revoked(journals: Callable[[], Journal]) -> None:
    journal = journals()
    await journal.open()
    await journal.insert_token(token("t1"), b"\x01\x02")
    await journal.insert_token(token("t2"), b"\x03")
    found = await journal.find_token("t1")
    assert found == (token("t1"), b"\x01\x02")  # times come back to the millisecond
    assert await journal.get_token("t1") == token("t1")
    assert await journal.get_token("nope") is None
    assert {t.id for t in await journal.list_tokens()} == {"t1", "t2"}
    assert await journal.revoke_token("t1", at=1_800_000_001.5)
    assert not await journal.revoke_token("t1", at=1_800_000_002.0)  # already revoked
    assert not await journal.revoke_token("nope", at=1_800_000_002.0)
    revoked = await journal.get_token("t1")
    assert revoked is not None
    assert revoked.revoked_at == 1_800_000_001.5


async def test_the_call_budget_is_counted_atomically_across_journals(
    journals: Callable[[], Journal],
) -> None:
    first, second = journals(), journals()
    await first.open()
    await second.open()
    await first.insert_token(token("t1", max_calls=5), b"h")
    # Two daemons spend one budget at once: exactly five calls are allowed, whoever makes them.
    allowed = await asyncio.gather(*(j.count_token_call("t1") for j in (first, second) * 10))
    assert allowed.count(True) == 5
    spent = await second.get_token("t1")
    assert spent is not None
    assert spent.calls == 5
    assert not await first.count_token_call("t1")
    assert not await first.count_token_call("nope")


async def test_a_live_lease_makes_the_run_busy_for_another_owner(journals: Callable[[], Journal]) -> None:
    holder, other = journals(), journals()
    await holder.open()
    await other.open()
    await holder.enter_run("r", lease=LEASE)
    assert await holder.enter_run("r", lease=LEASE) == []  # the holder enters again freely
    with pytest.raises(RunBusyError) as busy:
        await other.enter_run("r", lease=LEASE)
    assert busy.value.owner == holder.owner
    assert busy.value.run_id == "r"
    assert holder.owner in str(busy.value)
    run = await other.get_run("r")
    assert run is not None
    assert (run.owner, run.fence, run.entries) == (holder.owner, 1, 2)
    assert busy.value.expires_at == run.lease_expires_at


async def test_a_released_run_is_entered_by_another_owner_at_once(journals: Callable[[], Journal]) -> None:
    holder, other = journals(), journals()
    await holder.open()
    await other.open()
    await holder.enter_run("r", lease=LEASE)
    await holder.write(step("r", "a", 1, '"done"'))
    await holder.release_run("r")
    (replayed,) = await other.enter_run("r", lease=LEASE)
    assert replayed.output_json == '"done"'
    run = await other.get_run("r")
    assert run is not None
    assert (run.owner, run.fence) == (other.owner, 2)


async def test_an_expired_lease_is_taken_over_and_the_stale_holder_is_fenced(
    journals: Callable[[], Journal], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch)
    stale, taker = journals(), journals()
    await stale.open()
    await taker.open()
    await stale.enter_run("r", lease=LEASE)
    await stale.write(step("r", "a", 1, '"first"'))
    clock.now += LEASE  # the holder stopped renewing (paused, or killed)
    (recorded,) = await taker.enter_run("r", lease=LEASE)
    assert recorded.output_json == '"first"'
    await taker.write(step("r", "a", 1, '"second"'))
    # The stale holder wakes up: each of its writes is refused and overwrites nothing.
    with pytest.raises(RunLeaseLostError, match=f"taken over by {taker.owner}"):
        await stale.write(step("r", "a", 1, '"late"'))
    with pytest.raises(RunLeaseLostError):
        await stale.end_run("r", "completed")
    assert not await stale.renew_run("r", lease=LEASE)
    await stale.release_run("r")  # releases nothing it no longer holds
    (kept,) = await taker.load_steps("r")
    assert kept.output_json == '"second"'
    run = await taker.get_run("r")
    assert run is not None
    assert (run.owner, run.fence, run.status) == (taker.owner, 2, "running")
    assert run.lease_expires_at == clock.now + LEASE
    assert await taker.renew_run("r", lease=LEASE)


async def test_a_refused_write_fails_alone_in_its_batch(
    journals: Callable[[], Journal], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch)
    stale, taker = journals(), journals()
    await stale.open()
    await taker.open()
    await stale.enter_run("lost", lease=LEASE)
    await stale.enter_run("kept", lease=10 * LEASE)
    clock.now += LEASE
    await taker.enter_run("lost", lease=LEASE)
    refused, written = stale.write(step("lost", "a", 1)), stale.write(step("kept", "a", 1))
    await written  # committed in the same batch as the refused write
    with pytest.raises(RunLeaseLostError):
        await refused
    assert [rec.key for rec in await taker.load_steps("kept")] == ["a"]
    assert await taker.load_steps("lost") == []


async def test_a_write_for_a_run_never_entered_is_refused(journals: Callable[[], Journal]) -> None:
    journal = journals()
    await journal.open()
    with pytest.raises(JournalError, match="not entered"):
        await journal.write(step("r", "a", 1))


async def test_closing_releases_the_runs_still_held(journals: Callable[[], Journal]) -> None:
    holder, other = journals(), journals()
    await holder.open()
    await other.open()
    await holder.enter_run("r", lease=LEASE)
    await holder.close()
    await other.enter_run("r", lease=LEASE)


async def test_times_are_stored_as_integer_milliseconds(
    journals: Callable[[], Journal], journal_path: Path
) -> None:
    journal = journals()
    await journal.open()
    await journal.enter_run("r", lease=LEASE)
    rec = step("r", "a", 1)
    rec.started_at, rec.finished_at, rec.status = 1_800_000_000.1234, 1_800_000_000.9876, "completed"
    await journal.write(rec)
    await journal.record_event({"id": "e1", "name": "n", "data": {}, "ts": 1_800_000_000.5})
    with sqlite3.connect(journal_path) as db:
        assert db.execute("SELECT started_at, finished_at FROM steps").fetchone() == (
            1_800_000_000_123,
            1_800_000_000_988,
        )
        assert db.execute("SELECT typeof(started_at), typeof(updated_at) FROM runs").fetchone() == (
            "integer",
            "integer",
        )
        assert db.execute("SELECT ts FROM events").fetchone() == (1_800_000_000_500,)
    (loaded,) = await journal.load_steps("r")
    assert (loaded.started_at, loaded.finished_at) == (1_800_000_000.123, 1_800_000_000.988)
    assert [e["id"] for e in await journal.events_since("n", 1_800_000_000.5)] == ["e1"]
    assert await journal.events_since("n", 1_800_000_000.501) == []


async def test_the_null_journal_keeps_no_tokens() -> None:
    journal = NullJournal()
    with pytest.raises(JournalError, match="kept in the journal"):
        await journal.insert_token(token(), b"h")
    assert await journal.find_token("t1") is None
    assert not await journal.count_token_call("t1")
