"""Finding runs, a tool's calls and cancelling a run: the same answers from both journals
(each test runs on a SQLite file and on a fresh PostgreSQL database)."""

from __future__ import annotations

import asyncio

import pytest

from tests.postgres.test_journal_conformance import Opener, opened, step  # noqa: F401 (fixture)
from toolbridge._errors import RunLeaseLostError
from toolbridge._journal.base import Journal
from toolbridge._journal.runquery import RunQuery
from toolbridge._records import now


async def ids(journal: Journal, **query: object) -> list[str]:
    return [run.run_id for run in await journal.find_runs(RunQuery(**query))]  # type: ignore[arg-type]


async def record(journal: Journal) -> None:
    """order-1 (completed, called lookup), order-2 (failed, called refuse), batch-0..4
    (completed), live-1 (running, held)."""
    await journal.enter_run("order-1", lease=30)
    ok = step("order-1", "lookup#0", 1, name="lookup")
    ok.complete('{"stock":7}')
    await journal.write(ok)
    await journal.end_run("order-1", "completed")
    await journal.enter_run("order-2", lease=30)
    bad = step("order-2", "refuse#0", 1, name="refuse")
    bad.fail({"type": "UnknownWarehouse", "message": "no", "retryable": False, "error_id": "err_1"})
    await journal.write(bad)
    await journal.end_run("order-2", "failed", "ToolError: no")
    for i in range(5):
        await journal.enter_run(f"batch-{i}", lease=30)
        await journal.end_run(f"batch-{i}", "completed")
    await journal.enter_run("live-1", lease=30)


async def test_runs_are_found_by_id_status_tool_and_time(opened: Opener) -> None:  # noqa: F811
    async with opened() as journal:
        before = now() - 1
        await record(journal)
        everything = await ids(journal)
        assert everything[0] == "live-1"  # newest first
        expected = ["order-1", "order-2", "live-1", *(f"batch-{i}" for i in range(5))]
        assert sorted(everything) == sorted(expected)
        assert await ids(journal, search="der-") == ["order-2", "order-1"]
        assert await ids(journal, search="%") == []  # a LIKE wildcard is a plain character
        assert await ids(journal, search="_") == []
        assert await ids(journal, status="failed") == ["order-2"]
        assert await ids(journal, status="running") == ["live-1"]
        assert len(await ids(journal, status="completed")) == 6
        assert await ids(journal, tool="refuse") == ["order-2"]
        assert await ids(journal, tool="lookup") == ["order-1"]
        assert await ids(journal, tool="nothing") == []
        assert len(await ids(journal, since=before)) == 8
        assert await ids(journal, until=before) == []
        assert await ids(journal, since=now() + 60) == []


async def test_keyset_pages_list_every_run_once_in_order(opened: Opener) -> None:  # noqa: F811
    async with opened() as journal:
        await record(journal)
        everything = await journal.find_runs(RunQuery(limit=100))
        seen: list[str] = []
        after = None
        while True:
            page = await journal.find_runs(RunQuery(limit=3, after=after))
            seen += [run.run_id for run in page]
            if len(page) < 3:
                break
            after = (page[-1].started_at, page[-1].run_id)
        assert seen == [run.run_id for run in everything]
        assert len(seen) == 8


async def test_a_tools_calls_newest_first_with_their_errors(opened: Opener) -> None:  # noqa: F811
    async with opened() as journal:
        await record(journal)
        (call,) = await journal.tool_calls("refuse", limit=10)
        assert (call.run_id, call.step_key, call.status) == ("order-2", "refuse#0", "failed")
        assert call.error is not None
        assert call.error["error_id"] == "err_1"
        assert call.finished_at is not None
        assert await journal.tool_calls("nothing", limit=10) == []


async def test_a_cancel_takes_the_run_from_its_holder_and_says_who(opened: Opener) -> None:  # noqa: F811
    async with opened(owner="holder") as holder, opened(owner="view") as view:
        await holder.enter_run("job", lease=30)
        await holder.write(step("job", "a", 1))
        assert await view.cancel_run("job", by="alice", channel="web", reason="wrong customer")
        assert not await view.cancel_run("job", by="bob", channel="web", reason=None)  # once
        run = await view.get_run("job")
        assert run is not None
        assert (run.status, run.error) == ("cancelled", "cancelled by alice via web: wrong customer")
        assert await ids(view, status="cancelled") == ["job"]
        assert await ids(view, status="failed") == []
        # The holder finds out at its next renewal (and its next write is refused).
        assert not await holder.renew_run("job", lease=30)
        with pytest.raises(RunLeaseLostError):
            await asyncio.wait_for(holder.write(step("job", "b", 2)), 30)
        assert not await view.cancel_run("nope", by="alice", channel="web", reason=None)
        # Entered again, the run goes on (a replay): it is no longer shown cancelled.
        await view.enter_run("job", lease=30)
        again = await view.get_run("job")
        assert again is not None
        assert again.status == "running"
