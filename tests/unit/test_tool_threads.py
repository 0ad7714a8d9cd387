"""Sync tools' worker threads: off the loop, reused warm, woken on the loop's CPU, in parallel."""

from __future__ import annotations

import asyncio
import os
import threading

from toolbridge._affinity import Sleeper
from toolbridge._tools.threads import MAX_THREADS, run_in_thread

WAIT = 10.0  # seconds a test waits for threads before it fails


def _cpus() -> set[int]:
    return os.sched_getaffinity(0)


async def test_calls_one_after_another_run_off_the_loop_on_one_warm_worker_free_to_use_every_cpu() -> None:
    together = threading.Barrier(MAX_THREADS, timeout=WAIT)
    await asyncio.gather(*(run_in_thread(together.wait) for _ in range(MAX_THREADS)))  # all workers idle now
    loop_thread = threading.get_ident()
    seen: list[tuple[int, set[int]]] = []

    def tool() -> None:
        seen.append((threading.get_ident(), _cpus()))

    for _ in range(20):
        await run_in_thread(tool)
    threads = {thread for thread, _ in seen}
    assert loop_thread not in threads
    assert len(threads) == 1  # of the idle workers, the one that finished last takes the next call
    # Woken on the loop's CPU, each call still runs free to move to any of the process's CPUs.
    assert all(cpus == _cpus() for _, cpus in seen)


async def test_a_sleeping_worker_is_woken_on_the_wakers_cpu_and_then_freed() -> None:
    ready, go = threading.Event(), threading.Event()
    made: list[Sleeper] = []
    after: list[set[int]] = []

    def sleeper_thread() -> None:
        sleeper = Sleeper()
        made.append(sleeper)
        sleeper.asleep = True
        ready.set()
        go.wait(WAIT)  # asleep, as a worker on its queue
        sleeper.woke()
        after.append(_cpus())

    thread = threading.Thread(target=sleeper_thread)
    thread.start()
    assert ready.wait(WAIT)
    [sleeper] = made
    sleeper.wake_here()
    pinned = os.sched_getaffinity(sleeper.native_id)
    go.set()
    thread.join(WAIT)
    if len(_cpus()) > 1:
        assert len(pinned) == 1  # it wakes where the waker runs (a CPU the waker may use)
        assert pinned <= _cpus()
    else:
        assert pinned == _cpus()  # one CPU: nothing to choose, left alone
    assert after == [_cpus()]


async def test_a_worker_that_is_not_asleep_is_not_moved() -> None:
    sleeper = Sleeper()  # this thread, running: moving it would make the waker wait
    sleeper.wake_here()
    assert _cpus() == os.sched_getaffinity(sleeper.native_id)


async def test_blocking_calls_run_in_parallel_up_to_the_limit_and_the_rest_wait_their_turn() -> None:
    all_in = threading.Event()
    everyone = threading.Barrier(MAX_THREADS, action=all_in.set, timeout=WAIT)  # all at once, or it breaks
    released = threading.Event()
    ran: list[int] = []

    def blocking(number: int) -> int:
        if number < MAX_THREADS:
            everyone.wait()
            released.wait(WAIT)
        ran.append(number)
        return number

    calls = [asyncio.ensure_future(run_in_thread(blocking, number)) for number in range(MAX_THREADS + 3)]
    assert await asyncio.to_thread(all_in.wait, WAIT)  # every worker holds a blocked call
    assert ran == []  # so the three beyond the limit wait for a worker
    released.set()
    assert await asyncio.wait_for(asyncio.gather(*calls), WAIT) == list(range(MAX_THREADS + 3))
    assert sorted(ran) == list(range(MAX_THREADS + 3))
