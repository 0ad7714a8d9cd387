"""The zombie owner: a daemon paused past its lease wakes up to find its run taken over.

Host A enters run ``zombie`` and is inside the tool call work(2) when the test pauses it
(SIGSTOP: as a long GC pause, a frozen VM or a partition would). Its lease runs out; host B,
another process with its own socket, takes the run over, replays work(1) from the journal,
runs work(2) and work(3) and completes the run. Then A resumes (SIGCONT) and its work(2)
returns: A's late write is refused by the fence, A's command is stopped, and A says why.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import asyncpg

from tests.postgres.fleet import Host, lines

LEASE = 1.0


async def test_a_paused_owner_is_fenced_out_and_its_command_stopped(pg_url: str, tmp_path: Path) -> None:
    a_work, b_work = tmp_path / "a", tmp_path / "b"
    a_work.mkdir()
    b_work.mkdir()
    a = await Host.start("a", "zombie", pg_url, str(a_work), "a", str(LEASE), work=tmp_path)
    conn = await asyncpg.connect(pg_url)
    try:
        await a.report("holding")
        a.signal(signal.SIGSTOP)
        a_owner = await conn.fetchval("SELECT owner FROM runs WHERE run_id = 'zombie'")

        b = await Host.start("b", "zombie", pg_url, str(b_work), "b", str(LEASE), work=tmp_path)
        done = await b.report("done")
        assert await b.wait() == 0, b.stderr()
        assert done["exit_code"] == 0, done["stderr"]
        received = [json.loads(line) for line in done["stdout"].splitlines()]
        # work(1) was A's, replayed from the journal; work(2) and work(3) ran on B.
        assert [r["value"] for r in received] == [
            {"n": 1, "by": "a"},
            {"n": 2, "by": "b"},
            {"n": 3, "by": "b"},
        ]

        run = await conn.fetchrow("SELECT owner, fence, status FROM runs WHERE run_id = 'zombie'")
        assert run is not None
        assert run["owner"] != a_owner
        assert (run["fence"], run["status"]) == (2, "completed")

        # A wakes up inside work(2), which now returns: its write must not land.
        a.signal(signal.SIGUSR1)  # delivered once it runs again
        a.signal(signal.SIGCONT)
        lost = await a.report("lease_lost")
        assert "taken over" in lost["message"]
        assert await a.wait() == 3

        outputs = {
            row["step_key"]: row["output_json"]
            for row in await conn.fetch("SELECT step_key, output_json FROM steps WHERE kind = 'tool'")
        }
        by = sorted(json.loads(output)["by"] for output in outputs.values() if output is not None)
        assert by == ["a", "b", "b"], outputs  # B's work(2) stands; A's late one was refused
        invoked = [(i["host"], i["step"]) for i in lines(a_work / "invocations.jsonl")]
        assert invoked == [("a", 1), ("a", 2)]  # and A ran nothing after it lost the run
    finally:
        await conn.close()
        await a.kill()
