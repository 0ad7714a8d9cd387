"""One suite, both journals: what every implementation of the ``Journal`` protocol promises.

Each test runs twice, on a SQLite file and on a fresh PostgreSQL database (``journal_url``),
through ``open_journal`` as the bridge opens them.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest

from toolbridge._errors import JournalError, RunBusyError, RunLeaseLostError
from toolbridge._journal.base import Journal, open_journal
from toolbridge._records import SidecarToken, StepRecord, now

Opener = Callable[..., AbstractAsyncContextManager[Journal]]


@pytest.fixture
def opened(journal_url: str) -> Opener:
    """``async with opened(owner=...) as journal``: a journal on the test's location."""

    @asynccontextmanager
    async def opener(owner: str | None = None) -> AsyncIterator[Journal]:
        journal = open_journal(journal_url, owner=owner)
        await journal.open()
        try:
            yield journal
        finally:
            await journal.close()

    return opener


def step(run_id: str, key: str, seq: int, **fields: object) -> StepRecord:
    rec = StepRecord(
        run_id=run_id, key=key, parent_key=None, seq=seq, kind="tool", name="t", idempotency_key="k"
    )
    for name, value in fields.items():
        setattr(rec, name, value)
    return rec


async def test_steps_written_are_read_back_exactly(opened: Opener) -> None:
    async with opened() as journal:
        await journal.enter_run("r", lease=30)
        done = step("r", "a", 1, attempt_log=[{"attempt": 1, "error": "boom"}], attempts=2)
        done.complete('{"big":12345678901234567890,"s":"é"}')
        failed = step("r", "b", 2, parent_key="a")
        failed.fail({"type": "ToolError", "message": "no", "retryable": False})
        await asyncio.gather(journal.write(done), journal.write(failed), journal.write(step("r", "c", 3)))
    async with opened() as journal:
        loaded = await journal.enter_run("r", lease=30)
        assert [rec.key for rec in loaded] == ["a", "b", "c"]
        a, b, c = loaded
        assert (a.status, a.output_json, a.attempts, a.attempt_log) == (
            "completed",
            '{"big":12345678901234567890,"s":"é"}',
            2,
            [{"attempt": 1, "error": "boom"}],
        )
        assert a.finished_at == pytest.approx(done.finished_at, abs=0.001)
        assert (b.status, b.parent_key, b.error) == ("failed", "a", failed.error)
        assert (c.status, c.finished_at) == ("running", None)


async def test_the_last_snapshot_of_a_step_wins(opened: Opener) -> None:
    async with opened() as journal:
        await journal.enter_run("r", lease=30)
        rec = step("r", "a", 1)
        first = journal.write(rec)
        rec.attempts = 3
        rec.complete('"ok"')
        await asyncio.gather(first, journal.write(rec))
        (loaded,) = await journal.load_steps("r")
        assert (loaded.status, loaded.attempts, loaded.output_json) == ("completed", 3, '"ok"')


async def test_a_long_run_is_read_a_page_at_a_time(opened: Opener) -> None:
    async with opened() as journal:
        await journal.enter_run("r", lease=30)
        children = [step("r", f"agent/c{n}", n + 2, parent_key="agent", stale=n % 4 == 3) for n in range(10)]
        top = [step("r", "agent", 1), step("r", "other", 12), *children]
        await asyncio.gather(*(journal.write(rec) for rec in top))
    async with opened() as journal:
        first = await journal.enter_run("r", lease=30, limit=3)
        assert [rec.seq for rec in first] == [1, 2, 3]
        assert [rec.seq for rec in await journal.load_steps("r", after=3, limit=4)] == [4, 5, 6, 7]
        assert await journal.step_keys("r", after=9, limit=10) == [
            (10, "agent/c8"),
            (11, "agent/c9"),
            (12, "other"),
        ]
        # A parent's children not marked stale, in order, within the numbers asked for.
        assert await journal.child_keys("r", "agent", after=2, through=8, limit=10) == [
            (3, "agent/c1"),
            (4, "agent/c2"),
            (6, "agent/c4"),
            (7, "agent/c5"),
            (8, "agent/c6"),
        ]
        assert await journal.child_keys("r", None, through=100, limit=1) == [(1, "agent")]
        assert await journal.child_keys("r", None, after=1, through=100, limit=10) == [(12, "other")]
        assert await journal.load_step("r", "missing") is None
        loaded = await journal.load_step("r", "agent/c3")
        assert loaded is not None
        assert (loaded.seq, loaded.parent_key, loaded.stale) == (5, "agent", True)


async def test_a_step_reads_back_as_last_written_before_its_commit(opened: Opener) -> None:
    async with opened() as journal:
        await journal.enter_run("r", lease=30)
        rec = step("r", "a", 1)
        await journal.write(rec)
        rec.complete('"done"')
        written = journal.write(rec)  # queued: not committed yet
        queued = await journal.load_step("r", "a")
        await written
        committed = await journal.load_step("r", "a")
    assert queued is not None
    assert committed is not None
    assert (
        (queued.status, queued.output_json)
        == (committed.status, committed.output_json)
        == ("completed", '"done"')
    )


async def test_a_run_is_listed_with_its_owner_lease_and_entries(opened: Opener) -> None:
    async with opened(owner="host-a:1:aa") as journal:
        before = now()
        await journal.enter_run("r", lease=30)
        await journal.write(step("r", "a", 1))
        run = await journal.get_run("r")
        assert run is not None
        assert (run.status, run.entries, run.steps, run.owner, run.fence) == (
            "running",
            1,
            1,
            "host-a:1:aa",
            1,
        )
        assert run.lease_expires_at is not None
        assert before + 29 < run.lease_expires_at < now() + 31
        await journal.end_run("r", "failed", "ValueError: x")
        await journal.release_run("r")
        await journal.enter_run("r", lease=30)
        await journal.end_run("r", "completed")
        (listed,) = await journal.list_runs()
        assert (listed.run_id, listed.status, listed.entries, listed.error) == ("r", "completed", 2, None)
        assert await journal.get_run("nope") is None


async def test_a_second_owner_is_refused_while_the_lease_is_live(opened: Opener) -> None:
    async with opened(owner="host-a:1:aa") as a, opened(owner="host-b:2:bb") as b:
        await a.enter_run("r", lease=30)
        with pytest.raises(RunBusyError, match="host-a:1:aa") as caught:
            await b.enter_run("r", lease=30)
        assert caught.value.owner == "host-a:1:aa"
        run = await b.get_run("r")
        assert run is not None
        assert (run.owner, run.fence, run.entries) == ("host-a:1:aa", 1, 1)


async def test_a_released_run_is_taken_by_the_next_owner(opened: Opener) -> None:
    async with opened(owner="a") as a, opened(owner="b") as b:
        await a.enter_run("r", lease=30)
        await a.release_run("r")
        await b.enter_run("r", lease=30)
        run = await b.get_run("r")
        assert run is not None
        assert (run.owner, run.fence) == ("b", 2)


async def test_an_expired_lease_is_taken_over_and_the_old_owners_writes_are_refused(opened: Opener) -> None:
    async with opened(owner="a") as a, opened(owner="b") as b:
        await a.enter_run("r", lease=0.05)
        await a.write(step("r", "x", 1))
        deadline = now() + 10
        while True:  # the lease runs out by the database's clock, not ours: try until it has
            try:
                recorded = await b.enter_run("r", lease=30)
                break
            except RunBusyError:
                assert now() < deadline, "the expired lease was never taken over"
                await asyncio.sleep(0.02)
        assert [rec.key for rec in recorded] == ["x"]
        late = step("r", "x", 1)
        late.complete('"from the zombie"')
        with pytest.raises(RunLeaseLostError, match="taken over by b"):
            await a.write(late)
        with pytest.raises(RunLeaseLostError):
            await a.end_run("r", "completed")
        assert await a.renew_run("r", lease=30) is False
        assert await b.renew_run("r", lease=30) is True
        (kept,) = await b.load_steps("r")
        assert (kept.status, kept.output_json) == ("running", None)
        run = await b.get_run("r")
        assert run is not None
        assert (run.owner, run.fence, run.status) == ("b", 2, "running")


async def test_a_refused_write_does_not_refuse_the_others_in_its_batch(opened: Opener) -> None:
    async with opened(owner="a") as a, opened(owner="b") as b:
        await a.enter_run("lost", lease=30)
        await a.enter_run("kept", lease=30)
        await a.release_run("lost")
        await b.enter_run("lost", lease=30)
        outcomes = await asyncio.gather(
            a.write(step("lost", "s", 1)), a.write(step("kept", "s", 1)), return_exceptions=True
        )
        assert isinstance(outcomes[0], RunLeaseLostError)
        assert outcomes[1] is None
        assert [rec.key for rec in await a.load_steps("kept")] == ["s"]
        assert await a.load_steps("lost") == []


async def test_two_owners_racing_for_a_new_run_get_one_winner(opened: Opener) -> None:
    async with opened(owner="a") as a, opened(owner="b") as b:
        outcomes = await asyncio.gather(
            a.enter_run("r", lease=30), b.enter_run("r", lease=30), return_exceptions=True
        )
        assert sorted(type(outcome).__name__ for outcome in outcomes) == ["RunBusyError", "list"]


async def test_writing_a_run_never_entered_is_refused(opened: Opener) -> None:
    async with opened() as journal:
        with pytest.raises(JournalError, match="not entered"):
            await journal.write(step("never", "a", 1))


async def test_events_are_found_by_name_and_time(opened: Opener) -> None:
    async with opened() as journal:
        start = now()
        for index, name in enumerate(["paid", "other", "paid"]):
            await journal.record_event(
                {"id": f"e{index}", "name": name, "data": {"n": index}, "ts": start + index}
            )
        found = await journal.events_since("paid", start + 0.5)
        assert found == [
            {"id": "e2", "name": "paid", "data": {"n": 2}, "ts": pytest.approx(start + 2, abs=0.001)}
        ]
        assert [event["id"] for event in await journal.events_since("paid", start)] == ["e0", "e2"]


def token(token_id: str, *, max_calls: int = 2) -> SidecarToken:
    created = now()
    return SidecarToken(
        id=token_id, run_id="r", tools=("a", "b"), max_calls=max_calls, calls=0,
        created_at=created, expires_at=created + 60,
    )  # fmt: skip


async def test_sidecar_tokens_are_stored_listed_and_revoked(opened: Opener) -> None:
    async with opened() as journal:
        secret = secrets.token_bytes(32)
        await journal.insert_token(token("tok1"), secret)
        await journal.insert_token(token("tok2"), secret)
        found = await journal.find_token("tok1")
        assert found is not None
        assert (found[0].tools, found[0].max_calls, found[1]) == (("a", "b"), 2, secret)
        assert await journal.find_token("nope") is None
        assert {t.id for t in await journal.list_tokens()} == {"tok1", "tok2"}
        assert await journal.revoke_token("tok1", at=now()) is True
        assert await journal.revoke_token("tok1", at=now()) is False
        assert await journal.revoke_token("nope", at=now()) is False
        revoked = await journal.get_token("tok1")
        assert revoked is not None
        assert revoked.revoked_at is not None
        assert not revoked.active()


async def test_a_call_budget_is_never_overspent_by_journals_counting_at_once(opened: Opener) -> None:
    async with opened(owner="a") as a, opened(owner="b") as b:
        await a.insert_token(token("tok", max_calls=25), b"h")
        allowed = await asyncio.gather(*(journal.count_token_call("tok") for journal in [a, b] * 30))
        assert allowed.count(True) == 25
        counted = await b.get_token("tok")
        assert counted is not None
        assert counted.calls == 25


async def test_a_closed_journal_refuses_writes_at_once(opened: Opener) -> None:
    async with opened() as journal:
        await journal.enter_run("r", lease=30)
    with pytest.raises(JournalError, match="not open"):
        journal.write(step("r", "a", 1))


async def test_a_late_write_of_a_run_left_lately_is_allowed_and_one_left_long_ago_is_refused(
    opened: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A journal remembers the fences of the runs it left lately, not of every run it ever
    # left (a long-lived daemon's memory grew by an entry per run).
    monkeypatch.setattr("toolbridge._journal.fences.LEFT_REMEMBERED", 2)
    async with opened(owner="a") as a, opened(owner="b") as b:
        for run_id in ("old", "taken", "lately"):
            await a.enter_run(run_id, lease=30)
            await a.release_run(run_id)
        await b.enter_run("taken", lease=30)
        await a.write(step("lately", "s", 1))  # left, nobody took it since: still allowed
        with pytest.raises(RunLeaseLostError, match="taken over by b"):
            await a.write(step("taken", "s", 1))
        with pytest.raises(JournalError, match="not entered"):
            await a.write(step("old", "s", 1))  # left three runs ago: forgotten
        assert [rec.key for rec in await a.load_steps("lately")] == ["s"]
        assert await a.load_steps("old") == []
        await a.enter_run("old", lease=30)  # entering again takes a fence again
        await a.write(step("old", "s", 1))
