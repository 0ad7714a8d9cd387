"""Wake-ups between journals of one process on one SQLite file, each told in its own loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from toolbridge._journal.wakeups import Wakeups


def _recorder(into: list[tuple[str, str]]) -> Callable[[str, str], None]:
    return lambda kind, key: into.append((kind, key))


async def test_journals_on_one_file_wake_each_other_and_only_them() -> None:
    here, peer, elsewhere = Wakeups(), Wakeups(), Wakeups()
    heard: dict[str, list[tuple[str, str]]] = {"here": [], "peer": [], "elsewhere": []}
    for name, wakeups in (("here", here), ("peer", peer), ("elsewhere", elsewhere)):
        wakeups.watch(_recorder(heard[name]))
    here.join("/data/journal.db")
    peer.join("/data/journal.db")
    elsewhere.join("/data/other.db")
    here.spread("invoked", "refund")
    assert heard == {"here": [("invoked", "refund")], "peer": [("invoked", "refund")], "elsewhere": []}
    peer.leave()
    here.spread("settled", "inv_1")
    assert heard["peer"] == [("invoked", "refund")]  # it left: not told any more
    assert heard["here"][-1] == ("settled", "inv_1")
    here.leave()
    elsewhere.leave()


def test_a_journal_in_another_threads_loop_is_told_in_that_loop() -> None:
    loop = asyncio.new_event_loop()
    told = threading.Event()
    joined = threading.Event()
    seen: list[tuple[str, str, int]] = []
    other = Wakeups()

    def run_other() -> None:
        asyncio.set_event_loop(loop)

        def join() -> None:
            other.join("/data/journal.db")
            joined.set()

        def on_wakeup(kind: str, key: str) -> None:
            seen.append((kind, key, threading.get_ident()))
            told.set()

        other.watch(on_wakeup)
        loop.call_soon(join)
        loop.run_forever()

    thread = threading.Thread(target=run_other)
    thread.start()
    try:
        assert joined.wait(10)

        async def send() -> None:
            mine = Wakeups()
            mine.join("/data/journal.db")
            try:
                mine.spread("settled", "inv_1")
            finally:
                mine.leave()

        asyncio.run(send())
        assert told.wait(10)
        assert seen == [("settled", "inv_1", thread.ident)]
    finally:
        loop.call_soon_threadsafe(other.leave)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
