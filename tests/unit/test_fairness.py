"""The fair-share scheduler's edges, on its own: cancelled waiters, shares that grow back,
calls that stop counting."""

from __future__ import annotations

import asyncio
import itertools
import time

from tests.helpers import wait_until
from toolbridge._calls.fairness import FairShare, Ticket
from toolbridge._calls.pacing import TokenBucket


async def test_a_cancelled_waiter_leaves_the_queue_and_holds_nothing() -> None:
    shares = FairShare(shared=2, floor=1, max_wait=60, counted_for=60)
    first = await shares.enter("a")
    await shares.enter("b")  # two commands: a share of one each
    waiting = asyncio.ensure_future(shares.enter("a"))
    await asyncio.sleep(0)
    assert not waiting.done()
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    shares.leave("a", first)
    assert shares.executing("a") == 0
    await asyncio.wait_for(shares.enter("a"), 1)  # its slot is free again
    assert shares.executing("a") == 1


async def test_when_a_command_has_left_for_linger_the_others_shares_grow_back() -> None:
    shares = FairShare(shared=4, floor=1, max_wait=60, linger=0.05, counted_for=60)
    b = await shares.enter("b")
    for _ in range(2):
        await shares.enter("a")  # a share of 4 // 2
    third = asyncio.ensure_future(shares.enter("a"))
    await asyncio.sleep(0)
    assert not third.done()
    shares.leave("b", b)  # alone once it has lingered: no share at all
    await asyncio.sleep(0)
    assert not third.done()  # b still counts for a moment: its next call may come soon
    await asyncio.wait_for(third, 1)
    assert shares.executing("a") == 3


async def test_a_command_that_falls_idle_again_lingers_from_its_last_call() -> None:
    # One timer a command: the one set when it first fell idle finds it idle again, and waits on.
    linger = 0.2
    shares = FairShare(shared=4, floor=1, max_wait=60, linger=linger, counted_for=60)
    loop = asyncio.get_running_loop()
    shares.leave("b", await shares.enter("b"))  # b falls idle: it lingers from now
    for _ in range(2):
        await shares.enter("a")  # a share of 4 // 2 while b counts
    await asyncio.sleep(linger / 2)  # (not a wait for anything: b pauses between two calls)
    shares.leave("b", await shares.enter("b"))  # b calls again, and falls idle again
    last_idle = loop.time()
    third = asyncio.ensure_future(shares.enter("a"))
    await asyncio.wait_for(third, 5)  # let in once b has left
    assert loop.time() >= last_idle + linger * 0.9  # not when the first linger ran out
    assert shares.executing("a") == 3


async def test_a_call_running_for_counted_for_stops_counting_and_the_next_one_gets_in() -> None:
    shares = FairShare(shared=2, floor=1, max_wait=60, counted_for=0.05)
    await shares.enter("quiet")
    slow = await shares.enter("flood")  # its share of one: a call waiting on its tool
    started = time.monotonic()
    second = await asyncio.wait_for(shares.enter("flood"), 5)
    assert time.monotonic() - started >= 0.04  # not before the first had run for counted_for
    assert not slow.counted
    assert second.counted
    assert shares.executing("flood") == 1
    shares.leave("flood", slow)  # a call that no longer counted gives back nothing twice
    assert shares.executing("flood") == 1


async def test_what_the_scheduler_keeps_per_command_is_the_calls_of_the_last_moment() -> None:
    shares = FairShare(counted_for=0.01)
    long_call = await shares.enter("alone")  # e.g. a call waiting for a person, for hours
    for _ in range(1000):
        shares.leave("alone", await shares.enter("alone"))
    await asyncio.sleep(0.02)
    shares.leave("alone", await shares.enter("alone"))
    assert len(shares._commands["alone"].admitted) <= 1  # not the thousand calls ended behind it
    shares.leave("alone", long_call)
    assert shares.counted() == 0


async def _entered(
    shares: FairShare, owner: str, calls: int
) -> tuple[list[Ticket], list[asyncio.Future[Ticket]]]:
    """``calls`` calls of ``owner`` started at once: those let in, and those still waiting."""
    started = [asyncio.ensure_future(shares.enter(owner)) for _ in range(calls)]
    await asyncio.sleep(0)  # each ran to its admission or its wait (nothing else runs here)
    return [f.result() for f in started if f.done()], [f for f in started if not f.done()]


async def test_when_every_command_is_busy_each_executes_up_to_the_busy_share() -> None:
    shares = FairShare(shared=2, floor=1, max_wait=60, counted_for=60, linger=60, busy=4, quiet=1)
    await shares.enter("b")  # two commands, both quiet so far: a share of one each
    admitted, waiting = await _entered(shares, "a", 6)
    assert len(admitted) == 1  # b is quiet: a's backlog waits behind its share of one
    # b's second call waits too, which makes b busy: nobody is quiet, and the shares grow at once.
    more_b, waiting_b = await _entered(shares, "b", 6)
    assert len(more_b) == 3
    assert shares.executing("a") == 4
    assert shares.executing("b") == 4
    await asyncio.sleep(0)  # the calls let in resume
    assert sum(not f.done() for f in waiting) == 2  # past the busy share, calls still wait
    assert len(waiting_b) == 3


async def test_a_quiet_command_keeps_the_small_shares_beside_a_busy_one() -> None:
    shares = FairShare(shared=2, floor=1, max_wait=60, counted_for=60, linger=60, busy=4, quiet=1)
    quiet = await shares.enter("quiet")
    admitted, waiting = await _entered(shares, "flood", 6)
    assert len(admitted) == 1
    for _ in range(3):  # one call at a time, as a quiet command makes them: never busy
        shares.leave("quiet", quiet)
        quiet = await asyncio.wait_for(shares.enter("quiet"), 1)
    assert shares.executing("flood") == 1
    assert len([f for f in waiting if not f.done()]) == 5


async def test_a_command_with_a_few_calls_at_once_is_still_quiet_beside_a_flood() -> None:
    # A model's parallel tool calls: up to `quiet` of them at once keep the command quiet.
    shares = FairShare(shared=2, floor=1, max_wait=60, counted_for=60, linger=60, busy=4, quiet=3)
    await shares.enter("agent")
    _, flood_waiting = await _entered(shares, "flood", 6)
    parallel, agent_waiting = await _entered(shares, "agent", 2)  # three at once in all
    assert shares.share() == 1  # the flood is busy, the agent is not: small shares
    assert not parallel
    assert len(agent_waiting) == 2  # its own share is one too, as before
    assert shares.executing("flood") == 1
    assert len(flood_waiting) == 5


async def test_a_busy_command_that_turns_quiet_for_linger_brings_the_small_shares_back() -> None:
    linger = 0.1
    shares = FairShare(shared=2, floor=1, max_wait=60, counted_for=60, linger=linger, busy=4, quiet=1)
    a, _ = await _entered(shares, "a", 3)  # alone: all three go in, more than a share
    b, waiting_b = await _entered(shares, "b", 3)
    assert shares.share() == 4  # both busy
    b += await asyncio.wait_for(asyncio.gather(*waiting_b), 1)
    for owner, ticket in zip("aaabbb", a + b, strict=True):
        shares.leave(owner, ticket)
    calls = [await shares.enter("a"), await shares.enter("b")]  # one call each, for a while
    await wait_until(lambda: shares.share() == 1, timeout=linger * 50)  # quiet for linger: small
    more, waiting = await _entered(shares, "a", 2)
    assert not more
    assert len(waiting) == 2
    for owner, ticket in zip("ab", calls, strict=True):
        shares.leave(owner, ticket)


async def test_without_a_busy_share_the_shares_stay_small_when_every_command_is_busy() -> None:
    shares = FairShare(shared=2, floor=1, max_wait=60, counted_for=60, linger=60, busy=None)
    await _entered(shares, "a", 3)
    b, waiting_b = await _entered(shares, "b", 3)
    assert shares.executing("a") == 3  # alone when they entered: no share yet
    assert len(b) == 1
    assert len(waiting_b) == 2
    assert shares.share() == 1


def test_a_bucket_gives_its_burst_then_one_token_per_interval() -> None:
    bucket = TokenBucket(rate=10.0, burst=2)
    assert [bucket.take() for _ in range(2)] == [0.0, 0.0]
    waits = [bucket.take() for _ in range(3)]
    assert all(later > earlier for earlier, later in itertools.pairwise(waits))
    assert 0.25 < waits[-1] <= 0.3  # the third call past the burst waits three intervals
