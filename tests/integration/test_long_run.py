"""A long run against a real daemon: its memory holds a bounded part of it, and replay still holds.

Two ways a run grows long: a sidecar token's calls (a client process over the socket, as a
container would make them) and a host looping on ``Bridge.call_tool`` in one open run. In
both, the daemon keeps about a thousand records of the run in memory however many calls it
made, and a daemon started again on the journal answers every call from it.
"""

from __future__ import annotations

import asyncio
import gc
import sqlite3
from pathlib import Path
from typing import Any

from tests.helpers import client_elsewhere
from toolbridge import Bridge
from toolbridge._records import StepRecord

CALLS = 2000
KEPT = 1024  # the finished records a run keeps in memory (runstate.RECORDS_KEPT)
MARGIN = 64  # the token's own step, and calls still settling
WAIT = 120.0

CLIENT = """
import asyncio, json, sys
from inngest_tools import tools

async def main():
    for n in range(int(sys.argv[1])):
        print(json.dumps(await tools.lookup(f"sku-{n}")), flush=True)

asyncio.run(main())
"""


def records_alive(run_id: str) -> int:
    """Records of ``run_id`` anywhere in the process (other tests' records do not count)."""
    gc.collect()
    return sum(isinstance(thing, StepRecord) and thing.run_id == run_id for thing in gc.get_objects())


async def sandbox_elsewhere(tmp_path: Path, address: str, token: str, calls: int) -> list[Any]:
    return await client_elsewhere(tmp_path, CLIENT, str(calls), address, token, timeout=WAIT)


async def test_a_sidecar_token_making_thousands_of_calls_holds_a_bounded_part_of_its_run(
    journal_path: Path, tmp_path: Path
) -> None:
    looked_up: list[str] = []

    def lookup(sku: str) -> dict[str, Any]:
        looked_up.append(sku)
        return {"sku": sku, "stock": len(looked_up)}

    async with Bridge(journal=journal_path, tools={"lookup": lookup}) as bridge:
        minted = await bridge.mint_token(run_id="vm", tools=["lookup"], max_calls=10 * CALLS, ttl=600)
        assert minted.token is not None
        first = await sandbox_elsewhere(tmp_path, bridge.address, minted.token, CALLS)
        held = records_alive("vm")  # the token's run is still open: the daemon serves it
    # A daemon started again on the journal answers every call from it, the oldest too.
    async with Bridge(journal=journal_path, tools={"lookup": lookup}) as bridge:
        again = await sandbox_elsewhere(tmp_path, bridge.address, minted.token, CALLS)
    assert held <= KEPT + MARGIN  # not one record per call
    assert first == again == [{"sku": f"sku-{n}", "stock": n + 1} for n in range(CALLS)]
    assert len(looked_up) == CALLS  # the replay ran nothing
    with sqlite3.connect(journal_path) as db:
        (recorded,) = db.execute("SELECT COUNT(*) FROM steps WHERE run_id = 'vm'").fetchone()
    assert recorded == CALLS + 1  # every call, and the token's step


async def test_a_host_calling_tools_in_one_open_run_holds_a_bounded_part_of_it(journal_path: Path) -> None:
    ran: list[int] = []

    def double(n: int) -> int:
        ran.append(n)
        return 2 * n

    async with Bridge(journal=journal_path, tools={"double": double}) as bridge, bridge.run("loop"):
        for start in range(0, CALLS, 100):
            answers = await asyncio.gather(
                *(bridge.call_tool("double", [n], run_id="loop") for n in range(start, start + 100))
            )
            assert answers == [2 * n for n in range(start, start + 100)]
        held = records_alive("loop")
        # The first calls left memory long ago; asked again, they come from the journal.
        assert [await bridge.call_tool("double", [n], run_id="loop") for n in range(10)] == [
            2 * n for n in range(10)
        ]
    async with Bridge(journal=journal_path, tools={"double": double}) as bridge, bridge.run("loop"):
        replayed = [await bridge.call_tool("double", [n], run_id="loop") for n in range(0, CALLS, 7)]
    assert held <= KEPT + MARGIN
    assert replayed == [2 * n for n in range(0, CALLS, 7)]
    assert sorted(ran) == list(range(CALLS))  # each call ran once
