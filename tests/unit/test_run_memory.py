"""A long run in bounded memory: what a run keeps, what it reads back, and that replay still holds.

A run keeps a bounded part of its steps in memory (``RECORDS_KEPT`` finished records, the
occurrence counts of ``COUNTS_KEPT`` ids per counter) and reads the rest from the journal. The
tests set those bounds small, so that a few hundred calls go through eviction, and check that
every answer is the one the journal recorded: replayed results, occurrence counters, stale
marks, single flight, at-most-once.
"""

from __future__ import annotations

import asyncio
import gc
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from toolbridge import Bridge, CommandResult, JournalError, ToolContext, ToolOptions, tool
from toolbridge._durable import keycounter, runstate
from toolbridge._durable.keycounter import KeyCounter
from toolbridge._durable.keyfilter import FALSE_MAYBE, KeyFilter
from toolbridge._durable.runs import Runs
from toolbridge._durable.seqset import SPARSE_LIMIT, SeqSet
from toolbridge._journal.sqlite import SQLiteJournal
from toolbridge._records import StepRecord
from toolbridge.testing import FakeLauncher, FakeSandbox, ToolHarness

MANY = ToolOptions(max_calls=10**7, max_in_flight=1000)
TIMEOUT = 10.0


def records_alive(run_id: str) -> int:
    """Records of ``run_id`` anywhere in the process (other tests' records do not count)."""
    gc.collect()
    return sum(isinstance(thing, StepRecord) and thing.run_id == run_id for thing in gc.get_objects())


@pytest.fixture
def small_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs keep 8 finished records and counters 4 counts: a few calls are enough to evict."""
    monkeypatch.setattr(runstate, "RECORDS_KEPT", 8)
    monkeypatch.setattr(keycounter, "COUNTS_KEPT", 4)


# --- the compact parts -----------------------------------------------------------------------


def test_the_key_filter_never_forgets_a_key_and_rarely_says_maybe_for_another() -> None:
    added = [f"agent/lookup@{n:012x}" for n in range(200_000)]
    keys = KeyFilter()
    for key in added:
        keys.add(key)
    assert all(key in keys for key in added)
    false_maybes = sum(f"agent/lookup@{n:012x}#2" in keys for n in range(200_000))
    assert false_maybes <= 2 * FALSE_MAYBE * 200_000  # each would cost one read, never an error
    assert keys.nbytes <= 4 * len(added)  # a few bytes a key, where a set takes about 100


def test_a_seq_set_is_a_small_set_then_a_bit_each() -> None:
    asked = SeqSet()
    for seq in range(1000, 1000 + SPARSE_LIMIT - 1):
        asked.add(seq)
    assert asked.nbytes == 0  # still a plain set
    for seq in range(1000 + SPARSE_LIMIT - 1, 101_000):
        asked.add(seq)
    asked.add(3)  # recorded long before: the bitmap grows down
    asked.add(3)
    assert len(asked) == 100_001
    assert all(seq in asked for seq in (3, 1000, 50_000, 100_999))
    assert not any(seq in asked for seq in (0, 4, 999, 101_000, -1, "1000"))
    assert asked.nbytes <= 1.5 * 101_000 / 8 + 16  # one bit a number (plus growing room)
    with pytest.raises(ValueError, match="not negative"):
        asked.add(-1)


# --- a long run ------------------------------------------------------------------------------


async def test_a_run_of_50k_steps_holds_a_bounded_part_of_them(journal_path: Path) -> None:
    journal = SQLiteJournal(journal_path)
    await journal.open()
    runs = Runs(journal, set())
    try:
        run = await runs.enter("long")
        counter = KeyCounter(run)  # one long-lived counter, as a sidecar token's calls have

        async def step(n: int) -> None:
            key = await counter.key(f"sidecar/lookup@{n:08x}")
            assert await run.claim(key, by=counter) is None  # fresh: known new without a read

            async def work() -> None:
                rec = run.new_step(key, parent_key="sidecar", kind="tool", name="lookup", input_json="[1]")
                rec.complete('{"stock": 7}')
                await journal.write(rec)

            await run.single_flight(key, work, shield=True)

        for start in range(0, 50_000, 500):
            await asyncio.gather(*(step(n) for n in range(start, start + 500)))
        assert run.in_memory <= runstate.RECORDS_KEPT
        assert records_alive("long") <= runstate.RECORDS_KEPT
        assert run.reads <= 50_000 * FALSE_MAYBE * 3  # fresh steps all but never read the disk
        assert run.nbytes <= 4 * 50_000  # the key filter: a few bytes a step
        assert len(counter._counts) == keycounter.COUNTS_KEPT
        assert counter.asked.nbytes <= 1.5 * 50_000 / 8 + 16
        # What left memory is still the run's: the first step reads back as recorded.
        first = await run.claim("sidecar/lookup@00000000", by=KeyCounter(run))
        assert first is not None
        assert first.output_json == '{"stock": 7}'
        await runs.leave(run, None)
    finally:
        await journal.close()


async def test_entering_a_long_run_reads_its_first_records_and_only_the_keys_of_the_rest(
    journal_path: Path, small_memory: None
) -> None:
    ran: list[int] = []

    def lookup(n: int) -> int:
        ran.append(n)
        return n * 2

    async with ToolHarness({"lookup": lookup}, journal=journal_path, options=MANY) as harness:
        await asyncio.gather(*(harness.call("lookup", n) for n in range(300)))
    async with ToolHarness({"lookup": lookup}, journal=journal_path, options=MANY) as harness:
        run = harness._run
        assert run is not None
        assert run.in_memory == 8  # not 300
        assert run.reads == 0
        replayed = [await harness.call("lookup", n) for n in range(300)]
    assert [call.result for call in replayed] == [n * 2 for n in range(300)]
    assert all(call.replayed for call in replayed)
    assert sorted(ran) == list(range(300))  # each ran once: the replay ran none
    # Those not kept in memory came from the journal, with the steps recorded after them
    # (8 at a time here: no more than a run keeps): well under a read a step.
    assert 0 < run.reads <= 300 // 2


async def _record_steps(journal: SQLiteJournal, run_id: str, count: int, output: str) -> None:
    runs = Runs(journal, set())
    run = await runs.enter(run_id)
    for n in range(count):
        rec = run.new_step(f"s{n}", parent_key=None, kind="step", name=f"s{n}", input_json=None)
        rec.complete(output)
        await journal.write(rec)
    await runs.leave(run, None)


async def test_a_long_replay_reads_the_journal_once_a_page_not_once_a_step(journal_path: Path) -> None:
    journal = SQLiteJournal(journal_path)
    await journal.open()
    try:
        steps = runstate.RECORDS_KEPT + 4 * runstate.READ_AHEAD
        await _record_steps(journal, "long", steps, '"v1"')
        runs = Runs(journal, set())
        run = await runs.enter("long")
        assert run.in_memory == runstate.RECORDS_KEPT
        for n in range(steps):
            rec = await run.claim(f"s{n}")
            assert rec is not None
            assert rec.output_json == '"v1"'
        # Past the first RECORDS_KEPT (in memory since the run was entered), four times: a
        # read of one step, and one of the READ_AHEAD after it.
        assert run.reads == 2 * 4
        await runs.leave(run, None)
    finally:
        await journal.close()


async def test_reading_ahead_never_brings_back_an_older_write_of_a_step_looked_up(
    journal_path: Path, small_memory: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = SQLiteJournal(journal_path)
    await journal.open()
    try:
        await _record_steps(journal, "r", 50, '"v1"')
        as_entered = await journal.load_steps("r")
        runs = Runs(journal, set())
        run = await runs.enter("r")
        # A step of the run, written again since it was entered: its new row stands for a write
        # still queued, which a page of rows read ahead cannot see (load_step does). This
        # journal's pages show every row as it was when the run was entered.

        async def rows_as_entered(
            run_id: str, *, after: int | None = None, limit: int | None = None
        ) -> list[StepRecord]:
            rows = [rec for rec in as_entered if rec.seq > (after or 0)]
            return rows[:limit] if limit is not None else rows

        monkeypatch.setattr(journal, "load_steps", rows_as_entered)
        rewritten = await run.claim("s30")
        assert rewritten is not None
        assert rewritten.output_json == '"v1"'
        rewritten.output_json = '"v2"'
        await journal.write(rewritten)
        for n in range(40, 50):  # s30 leaves memory
            await run.claim(f"s{n}")
        assert run.record("s30") is None
        reads = run.reads
        assert (await run.claim("s29")) is not None  # read, and the 8 after it read ahead: s30 too
        assert run.reads == reads + 2
        again = await run.claim("s30")
        assert again is not None
        assert again.output_json == '"v2"'  # its own read, not the page's
        await runs.leave(run, None)
    finally:
        await journal.close()


async def test_calls_evicted_from_memory_are_replayed_from_the_journal_in_the_same_run(
    small_memory: None,
) -> None:
    ran: Counter[int] = Counter()

    def lookup(n: int) -> dict[str, int]:
        ran[n] += 1
        return {"n": n, "runs": ran[n]}

    # Host calls (no command): each call is its own asker, so the same call again is a replay.
    async with ToolHarness({"lookup": lookup}, command=None, options=MANY) as harness:
        first = [await harness.call("lookup", n) for n in range(100)]
        again = [await harness.call("lookup", n) for n in reversed(range(100))]
    assert all(call.replayed for call in again)
    assert {call.step_key: call.result_json for call in first} == {
        call.step_key: call.result_json for call in again
    }
    assert set(ran.values()) == {1}


async def test_occurrence_counts_stay_exact_after_they_leave_memory(small_memory: None) -> None:
    ran: Counter[str] = Counter()

    def charge(what: str) -> str:
        ran[what] += 1
        return f"{what}-{ran[what]}"

    # The same call three times, with more ids between than a counter keeps: the third is
    # charge#3 still, and a replay meets every call's own record.
    sequence = ["coffee", *map(str, range(20)), "coffee", *map(str, range(20, 40)), "coffee", "coffee"]
    async with ToolHarness({"charge": charge}, options=MANY) as harness:
        first = [await harness.call("charge", what) for what in sequence]
        await harness.restart()
        again = [await harness.call("charge", what) for what in sequence]
    coffees = [call for call, what in zip(first, sequence, strict=True) if what == "coffee"]
    assert [call.step_key.rsplit("#", 1)[-1] for call in coffees[1:]] == ["2", "3", "4"]
    assert [call.result for call in coffees] == ["coffee-1", "coffee-2", "coffee-3", "coffee-4"]
    assert [call.step_key for call in again] == [call.step_key for call in first]
    assert [call.result_json for call in again] == [call.result_json for call in first]
    assert all(call.replayed for call in again)
    assert ran["coffee"] == 4


async def test_a_counter_counts_only_its_own_calls_after_eviction(small_memory: None) -> None:
    """Two counters asking the same ids: each counts from 1, as with all counts in memory."""
    async with ToolHarness({"echo": lambda text: text}, options=MANY) as harness:
        run = harness._run
        assert run is not None
        one, two = KeyCounter(run), KeyCounter(run)
        keys_one = [await one.key(base) for base in ["a", *map(str, range(10)), "a"]]
        for key in keys_one:
            await run.claim(key, by=one)
            if run.record(key) is None:
                run.new_step(key, parent_key=None, kind="tool", name="echo", input_json=None)
        assert keys_one[-1] == "a#2"
        assert [await two.key("a"), await two.key("a"), await two.key("a")] == ["a", "a#2", "a#3"]


async def test_stale_marks_are_right_for_children_that_left_memory(small_memory: None) -> None:
    version = {"n": 1}
    interrupted = asyncio.Event()

    async def plan(args: dict[str, Any], ctx: ToolContext) -> str:
        for n in range(40):
            if version["n"] == 1 or n % 2 == 0:  # the new code asks for the even steps only
                await ctx.step.run(f"part-{n}", lambda n=n: n)
        if version["n"] == 1:
            interrupted.set()
            await asyncio.Event().wait()  # the host dies before the group finishes
        return "planned"

    async with ToolHarness({"plan": tool.group(run=plan)}) as harness:
        pending = asyncio.ensure_future(harness.call("plan"))
        async with asyncio.timeout(TIMEOUT):
            await interrupted.wait()
        await harness.restart()
        version["n"] = 2
        call = await harness.call("plan")
        steps = {rec.name: rec for rec in await harness.recorded() if rec.name.startswith("part-")}
    pending.cancel()
    assert call.result == "planned"
    assert {name for name, rec in steps.items() if rec.stale} == {f"part-{n}" for n in range(1, 40, 2)}


async def test_a_re_run_command_names_the_calls_it_did_not_make_again_after_eviction(
    tmp_path: Path, small_memory: None
) -> None:
    wanted = {"skus": list(range(30))}
    first_time = asyncio.Event()

    async def agent(sandbox: FakeSandbox) -> int:
        for sku in wanted["skus"]:
            await sandbox.call("lookup", sku)
        if not first_time.is_set():
            first_time.set()
            await asyncio.Event().wait()  # the host dies while the command runs
        return 0

    async def order(bridge: Bridge) -> CommandResult:
        async with bridge.run("order") as step:
            return await step.sandbox.commands.run("agent", ["agent"], tools={"lookup": lambda sku: sku})

    journal = tmp_path / "journal.db"
    launcher = FakeLauncher(agent)
    async with launcher.bridge(journal) as bridge:
        interrupted = asyncio.ensure_future(order(bridge))
        async with asyncio.timeout(TIMEOUT):
            await first_time.wait()
        interrupted.cancel()
        with pytest.raises(asyncio.CancelledError):
            await interrupted
    wanted["skus"] = [sku for sku in range(30) if sku % 3]  # the re-run skips every third
    async with launcher.bridge(journal) as bridge:
        result = await order(bridge)
    assert len(result.not_asked_again) == 10
    assert all(key.startswith("agent/lookup@") for key in result.not_asked_again)


async def test_top_level_steps_not_asked_for_again_are_marked_stale_when_the_run_ends(
    tmp_path: Path, small_memory: None
) -> None:
    journal = tmp_path / "journal.db"
    async with Bridge(journal) as bridge:
        async with bridge.run("r") as step:
            for n in range(30):
                await step.run(f"s{n}", lambda n=n: n)
        async with bridge.run("r") as step:
            for n in range(0, 30, 2):
                assert await step.run(f"s{n}", lambda: "ran again") == n
    reader = SQLiteJournal(journal)
    await reader.open()
    try:
        stale = {rec.key for rec in await reader.load_steps("r") if rec.stale}
    finally:
        await reader.close()
    assert stale == {f"s{n}" for n in range(1, 30, 2)}


async def test_an_interrupted_at_most_once_call_is_not_run_again_after_eviction(
    small_memory: None,
) -> None:
    started = asyncio.Event()
    ran: list[str] = []

    async def transfer(args: dict[str, Any]) -> str:
        ran.append(args["order"])
        if args["order"] == "o-30":
            started.set()
            await asyncio.Event().wait()  # the host dies while this transfer is under way
        return f"paid {args['order']}"

    orders = [f"o-{n}" for n in range(40)]
    async with ToolHarness({"transfer": tool.step(run=transfer, at_most_once=True)}, options=MANY) as harness:
        for order in orders[:30]:
            await harness.call("transfer", order=order)
        pending = asyncio.ensure_future(harness.call("transfer", order="o-30"))
        async with asyncio.timeout(TIMEOUT):
            await started.wait()
        for order in orders[31:]:
            await harness.call("transfer", order=order)
        await harness.restart()  # o-30 stays running in the journal, beyond what is kept in memory
        again = [await harness.call("transfer", order=order) for order in orders]
    pending.cancel()
    assert ran == orders  # each ran once: the interrupted one was not run again
    interrupted = again.pop(30)
    assert interrupted.error is not None
    assert interrupted.error.type == "StepInterrupted"
    assert [call.result for call in again] == [f"paid {order}" for order in orders if order != "o-30"]
    assert all(call.replayed for call in again)


async def test_two_asks_of_an_evicted_interrupted_call_run_it_once(small_memory: None) -> None:
    interrupted = asyncio.Event()
    running_again = asyncio.Event()
    release = asyncio.Event()
    ran: Counter[int] = Counter()

    async def slow(n: int) -> int:
        ran[n] += 1
        if n == 25 and ran[n] == 1:
            interrupted.set()
            await asyncio.Event().wait()  # the host dies during this call
        if n == 25:
            running_again.set()
            await release.wait()
        return n

    async with ToolHarness({"slow": slow}, command=None, options=MANY) as harness:
        for n in range(25):
            await harness.call("slow", n)
        pending = asyncio.ensure_future(harness.call("slow", 25))
        async with asyncio.timeout(TIMEOUT):
            await interrupted.wait()
        for n in range(26, 60):
            await harness.call("slow", n)
        await harness.restart()  # call 25 stays running in the journal, beyond what is kept
        both = asyncio.gather(harness.call("slow", 25), harness.call("slow", 25))
        async with asyncio.timeout(TIMEOUT):
            await running_again.wait()
            release.set()
            one, two = await both
    pending.cancel()
    assert one.result == two.result == 25
    assert ran[25] == 2  # once before the restart, once after it for both askers
    assert sum(ran.values()) == 61


async def test_random_calls_and_replays_agree_with_the_journal(small_memory: None) -> None:
    """Calls repeated at random, through eviction: a replay meets every key and result."""
    chooser = random.Random(14)
    sequence = [chooser.randrange(30) for _ in range(300)]
    ran: Counter[int] = Counter()

    def pick(n: int) -> str:
        ran[n] += 1
        return f"{n}:{ran[n]}"

    async with ToolHarness({"pick": pick}, options=MANY) as harness:
        first = [await harness.call("pick", n) for n in sequence]
        await harness.restart()
        again = [await harness.call("pick", n) for n in sequence]
    assert [call.result for call in first] == [
        f"{n}:{sequence[: i + 1].count(n)}" for i, n in enumerate(sequence)
    ]
    assert [(call.step_key, call.result_json) for call in again] == [
        (call.step_key, call.result_json) for call in first
    ]
    assert sum(ran.values()) == len(sequence)


async def test_a_run_whose_keys_cannot_be_read_is_not_entered_and_its_lease_is_let_go(
    tmp_path: Path, small_memory: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = tmp_path / "journal.db"
    async with Bridge(journal) as bridge, bridge.run("r") as step:
        for n in range(20):  # more than a run keeps: entering it again reads keys
            await step.run(f"s{n}", lambda n=n: n)
    readable = SQLiteJournal.step_keys

    async def unreadable(
        self: SQLiteJournal, run_id: str, *, after: int = 0, limit: int
    ) -> list[tuple[int, str]]:
        raise JournalError("journal read failed: disk I/O error")

    monkeypatch.setattr(SQLiteJournal, "step_keys", unreadable)
    async with Bridge(journal) as bridge:
        with pytest.raises(JournalError, match="disk I/O error"):
            async with bridge.run("r"):
                pytest.fail("the run was entered without its keys")
        monkeypatch.setattr(SQLiteJournal, "step_keys", readable)
        # The lease was let go at once: another bridge enters the run now, and replays it.
        async with Bridge(journal) as other, other.run("r") as step:
            assert await step.run("s19", lambda: "ran again") == 19
