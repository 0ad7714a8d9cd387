"""A slow call shows in the journal while it runs, as `toolbridge trace` would show it."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from tests.helpers import WAIT, call_request, held_command, raw_call, result_of, wait_until
from toolbridge import Bridge


def step_status(journal: Path, name: str) -> str | None:
    with sqlite3.connect(journal) as db:
        row = db.execute("SELECT status FROM steps WHERE name = ?", (name,)).fetchone()
    return None if row is None else str(row[0])


async def test_a_slow_call_is_recorded_as_running_then_completed(
    bridge: Bridge, tmp_path: Path, journal_path: Path
) -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow() -> str:
        started.set()
        await release.wait()
        return "done"

    async with held_command(bridge, tmp_path, {"slow": slow}) as held:
        call = asyncio.create_task(raw_call(held, call_request("slow")))
        await asyncio.wait_for(started.wait(), WAIT)
        await wait_until(lambda: step_status(journal_path, "slow") == "running")
        release.set()
        assert result_of(await asyncio.wait_for(call, WAIT)) == "done"
        assert step_status(journal_path, "slow") == "completed"  # committed before the reply
