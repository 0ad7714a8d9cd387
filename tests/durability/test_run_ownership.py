"""Two real host processes on one journal file: a run has one owner at a time.

- Two hosts entering the same run at once: exactly one executes its steps (an at-most-once
  tool runs once); the other gets ``RunBusyError`` naming the holder.
- A holder killed with SIGKILL is known dead by the next host on this machine (pid, boot id,
  start time in its owner id): that host takes the run over at once (its fence increases) and
  replays the steps the dead one completed. A live holder is waited for, then named.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import WAIT

OWNER_HOST = Path(__file__).with_name("owner_host.py")
RUN_ID = "order-7"


@dataclass
class Host:
    process: asyncio.subprocess.Process

    async def event(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), WAIT)
        assert line, "the host exited without saying why"
        event: dict[str, Any] = json.loads(line)
        return event

    def cue(self, line: str = "") -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{line}\n".encode())

    async def exited(self) -> int:
        return await asyncio.wait_for(self.process.wait(), WAIT)


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    started: list[Host] = []

    async def launch(lease: float, *flags: str) -> Host:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(OWNER_HOST),
            str(tmp_path / "journal.db"),
            RUN_ID,
            str(tmp_path),
            str(lease),
            *flags,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        host = Host(process)
        started.append(host)
        assert (await host.event())["event"] == "ready"
        return host

    try:
        yield launch
    finally:
        for host in started:
            if host.process.returncode is None:
                host.process.kill()
                await host.process.wait()


def invocations(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "invocations.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run_row(tmp_path: Path) -> tuple[str, int, Any]:
    with sqlite3.connect(tmp_path / "journal.db") as db:
        query = "SELECT owner, fence, lease_expires_at FROM runs WHERE run_id = ?"
        row = db.execute(query, (RUN_ID,)).fetchone()
    return row[0], row[1], row[2]


async def test_two_hosts_entering_one_run_at_once_execute_it_once(
    start: Callable[..., Any], tmp_path: Path
) -> None:
    first, second = await asyncio.gather(start(30.0, "--wait=0"), start(30.0, "--wait=0"))
    first.cue("go")
    second.cue("go")
    events = await asyncio.gather(first.event(), second.event())
    assert sorted(event["event"] for event in events) == ["busy", "holding"]
    holder, refused = (first, second) if events[0]["event"] == "holding" else (second, first)
    held, busy = (events[0], events[1]) if holder is first else (events[1], events[0])
    assert busy["owner"].split(":")[1] == str(holder.process.pid)  # host:pid:random
    assert f"run {RUN_ID!r} is held by {busy['owner']}" in busy["message"]
    assert await refused.exited() == 0
    holder.cue()
    assert (await holder.event())["event"] == "done"
    assert await holder.exited() == 0
    assert held["a"]["by"] == holder.process.pid
    assert invocations(tmp_path) == [
        {"step": "a", "pid": holder.process.pid},
        {"step": "b", "pid": holder.process.pid},
    ]
    owner, fence, lease = run_row(tmp_path)
    assert (owner, fence, lease) == (busy["owner"], 1, None)  # left: the lease is released


async def test_a_killed_holders_run_is_taken_over_at_once_by_the_next_host_on_this_machine(
    start: Callable[..., Any], tmp_path: Path
) -> None:
    # A lease far longer than the test waits: the takeover cannot come from its expiry.
    dead, taker = await asyncio.gather(start(3600.0), start(3600.0))
    dead.cue("go")
    held = await dead.event()
    assert held["event"] == "holding"
    os.kill(dead.process.pid, signal.SIGKILL)
    assert await dead.exited() == -signal.SIGKILL
    dead_owner, fence, lease = run_row(tmp_path)
    assert fence == 1
    assert lease is not None  # killed: nobody released it, and it is live for an hour
    taker.cue("go")
    took_over = await taker.event()
    assert took_over["event"] == "holding"  # no busy, no wait for the lease
    # Step a completed before the kill: replayed from the journal, not executed again.
    assert took_over["a"] == held["a"] == {"charged": "a", "by": dead.process.pid}
    taker.cue()
    assert (await taker.event())["event"] == "done"
    assert await taker.exited() == 0
    assert invocations(tmp_path) == [
        {"step": "a", "pid": dead.process.pid},
        {"step": "b", "pid": taker.process.pid},
    ]
    owner, fence, _ = run_row(tmp_path)
    assert owner != dead_owner
    assert fence == 2  # one takeover


async def test_a_live_holder_is_waited_for_then_named_in_run_busy_error(
    start: Callable[..., Any], tmp_path: Path
) -> None:
    holder, waiter = await asyncio.gather(start(3600.0), start(3600.0, "--wait=0.5"))
    holder.cue("go")
    assert (await holder.event())["event"] == "holding"
    waiter.cue("go")
    busy = await waiter.event()
    assert busy["event"] == "busy"
    assert busy["owner"].split(":")[1] == str(holder.process.pid)
    assert f"run {RUN_ID!r} is held by {busy['owner']}" in busy["message"]
    assert await waiter.exited() == 0
    holder.cue()
    assert (await holder.event())["event"] == "done"
    _, fence, _ = run_row(tmp_path)
    assert fence == 1  # never taken from the live holder


async def test_an_entry_waiting_for_a_live_holder_enters_once_it_leaves(
    start: Callable[..., Any], tmp_path: Path
) -> None:
    holder, waiter = await asyncio.gather(start(3600.0), start(3600.0))  # the default wait
    holder.cue("go")
    held = await holder.event()
    assert held["event"] == "holding"
    waiter.cue("go")
    holder.cue()  # the holder finishes and leaves while the waiter waits
    assert (await holder.event())["event"] == "done"
    entered = await waiter.event()
    assert entered["event"] == "holding"
    assert entered["a"] == held["a"]  # replayed
