"""The fair-share scheduler's edges, on its own: cancelled waiters, shares that grow back."""

from __future__ import annotations

import asyncio
import itertools

from toolbridge._calls.fairness import FairShare
from toolbridge._calls.pacing import TokenBucket


async def test_a_cancelled_waiter_leaves_the_queue_and_holds_nothing() -> None:
    shares = FairShare(shared=2, floor=1, max_wait=60)
    await shares.enter("a")
    await shares.enter("b")  # two commands: a share of one each
    waiting = asyncio.ensure_future(shares.enter("a"))
    await asyncio.sleep(0)
    assert not waiting.done()
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    shares.leave("a")
    assert shares.executing("a") == 0
    await asyncio.wait_for(shares.enter("a"), 1)  # its slot is free again
    assert shares.executing("a") == 1


async def test_when_a_command_has_left_for_linger_the_others_shares_grow_back() -> None:
    shares = FairShare(shared=4, floor=1, max_wait=60, linger=0.05)
    await shares.enter("b")
    for _ in range(2):
        await shares.enter("a")  # a share of 4 // 2
    third = asyncio.ensure_future(shares.enter("a"))
    await asyncio.sleep(0)
    assert not third.done()
    shares.leave("b")  # alone once it has lingered: no share at all
    await asyncio.sleep(0)
    assert not third.done()  # b still counts for a moment: its next call may come soon
    await asyncio.wait_for(third, 1)
    assert shares.executing("a") == 3


def test_a_bucket_gives_its_burst_then_one_token_per_interval() -> None:
    bucket = TokenBucket(rate=10.0, burst=2)
    assert [bucket.take() for _ in range(2)] == [0.0, 0.0]
    waits = [bucket.take() for _ in range(3)]
    assert all(later > earlier for earlier, later in itertools.pairwise(waits))
    assert 0.25 < waits[-1] <= 0.3  # the third call past the burst waits three intervals
