"""A host SIGKILLed and started again on this machine resumes its run at once, on both journals.

The first host (a real process) enters the run with an hour's lease and completes step ``a``;
it is killed with SIGKILL, so nobody releases the lease. A second real process, on the same
machine, enters the run: it knows the holder's process is gone (pid, boot id and start time
in the owner id), takes the run over at once (fence 2) and replays ``a`` from the journal.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from tests.durability.test_run_ownership import OWNER_HOST, RUN_ID, Host, invocations
from toolbridge._journal.base import open_journal

HOUR = 3600.0


async def launch(journal: str, tmp_path: Path) -> Host:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(OWNER_HOST),
        journal,
        RUN_ID,
        str(tmp_path),
        str(HOUR),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    host = Host(process)
    assert (await host.event())["event"] == "ready"
    return host


async def holder_and_fence(journal: str) -> tuple[str | None, int]:
    opened = open_journal(journal)
    await opened.open()
    try:
        run = await opened.get_run(RUN_ID)
    finally:
        await opened.close()
    assert run is not None
    return run.owner, run.fence


async def test_a_restarted_host_takes_its_killed_predecessors_run_over_at_once(
    journal_url: str, tmp_path: Path
) -> None:
    hosts: list[Host] = []
    try:
        dead = await launch(journal_url, tmp_path)
        hosts.append(dead)
        dead.cue("go")
        held = await dead.event()
        assert held["event"] == "holding"
        os.kill(dead.process.pid, signal.SIGKILL)
        assert await dead.exited() == -signal.SIGKILL
        dead_owner, fence = await holder_and_fence(journal_url)
        assert fence == 1

        restarted = await launch(journal_url, tmp_path)
        hosts.append(restarted)
        restarted.cue("go")
        resumed = await restarted.event()
        assert resumed["event"] == "holding"  # at once: no busy, no retry loop
        assert resumed["a"] == held["a"]  # replayed, not charged again
        restarted.cue()
        assert (await restarted.event())["event"] == "done"
        assert await restarted.exited() == 0
    finally:
        for host in hosts:
            if host.process.returncode is None:
                host.process.kill()
                await host.process.wait()
    owner, fence = await holder_and_fence(journal_url)
    assert owner != dead_owner
    assert fence == 2
    assert [entry["step"] for entry in invocations(tmp_path)] == ["a", "b"]
