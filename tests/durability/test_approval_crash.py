"""A host killed with SIGKILL while a call waits on a person; the request approved from the CLI
while no host runs; the run entered again: the tool runs exactly once, and the sandbox's
replayed call gets its result. Parallel calls around the waiting one are answered from the
journal."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import sys
from collections import Counter
from pathlib import Path

import pytest

HOST = Path(__file__).with_name("approval_host.py")
TOOLBRIDGE = str(Path(sys.executable).with_name("toolbridge"))
WAIT = 60.0


def _pending_and_charged(journal: Path) -> list[str] | None:
    """The pending request ids, once both charges completed and the wire waits; else None."""
    if not journal.exists():
        return None
    try:
        with sqlite3.connect(journal) as db:
            requests = [
                row[0] for row in db.execute("SELECT request_id FROM approvals WHERE state = 'pending'")
            ]
            charged = db.execute(
                "SELECT COUNT(*) FROM steps WHERE kind = 'tool' AND name = 'charge' AND status = 'completed'"
            ).fetchone()[0]
    except sqlite3.OperationalError:  # the schema is still being created
        return None
    return requests if requests and charged == 2 else None


def _invocations(work: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (work / "invocations.jsonl").read_text().splitlines()]


async def _host(work: Path, entry: int, at_most_once: bool) -> asyncio.subprocess.Process:
    argv = [sys.executable, str(HOST), str(work / "journal.db"), "run", str(work), str(entry)]
    if at_most_once:
        argv.append("--at-most-once")
    return await asyncio.create_subprocess_exec(*argv, stderr=asyncio.subprocess.PIPE)


@pytest.mark.parametrize("at_most_once", [False, True], ids=["at-least-once", "at-most-once"])
async def test_killed_while_pending_approved_offline_resumed_runs_the_tool_once(
    tmp_path: Path, at_most_once: bool
) -> None:
    journal = tmp_path / "journal.db"
    first = await _host(tmp_path, 1, at_most_once)
    async with asyncio.timeout(WAIT):
        while (requests := _pending_and_charged(journal)) is None:  # noqa: ASYNC110 - another process
            await asyncio.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    await asyncio.wait_for(first.wait(), WAIT)
    assert first.returncode == -signal.SIGKILL
    assert Counter(i["tool"] for i in _invocations(tmp_path)) == {"charge": 2}  # the wire never started

    (request_id,) = requests
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE,
        "approvals",
        "approve",
        request_id,
        "--journal",
        str(journal),
        "--as",
        "alice",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 0, stderr.decode()

    second = await _host(tmp_path, 2, at_most_once)
    _, stderr = await asyncio.wait_for(second.communicate(), WAIT)
    assert second.returncode == 0, stderr.decode()
    outcome = json.loads((tmp_path / "outcome-2.json").read_text())
    assert outcome["exit_code"] == 0, outcome
    received = json.loads((tmp_path / "received-2.json").read_text())
    assert [answer["value"].get("charge", answer["value"].get("wire")) for answer in received] == [1, 500, 2]
    assert Counter(i["tool"] for i in _invocations(tmp_path)) == {"charge": 2, "wire": 1}  # each exactly once
    with sqlite3.connect(journal) as db:
        (state, by, channel) = db.execute("SELECT state, decided_by, channel FROM approvals").fetchone()
        statuses = db.execute("SELECT status FROM runs").fetchall()
    assert (state, by, channel) == ("approved", "alice", "cli")
    assert statuses == [("completed",)]
