"""`toolbridge trace` in a terminal shows what the web view shows, and `--follow` follows a
run that goes on in another process until it ends."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from pathlib import Path

from tests.faces.conftest import REPO, TOOLBRIDGE, WAIT, open_gate, stop
from tests.faces.runs import record_runs
from toolbridge._journal.sqlite import SQLiteJournal


async def toolbridge(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE, *args, cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_trace_shows_reasons_windows_hooks_and_stale_steps(tmp_path: Path) -> None:
    journal = tmp_path / "runs.db"
    await record_runs(journal)
    status, out = await toolbridge("trace", "order-42", "--journal", str(journal))
    assert status == 0
    assert "output failed validation: /stock: Input should be a valid integer" in out
    # Each window that passed without the event, as many as the journal recorded (timing decides).
    windows = await _windows(journal)
    assert windows >= 1
    assert out.count("no event yet") == windows
    assert 'on_start: changed the input to {"sku": "A1"}' in out
    assert "legacy-check  run  completed" in out
    assert "not asked for again" in out
    assert "attempt 1" in out
    assert "Busy: the warehouse is busy" in out

    status, out = await toolbridge("trace", "refund-7", "--journal", str(journal), "--follow")
    assert status == 1, "following a failed run ends at once, with a failing status"
    assert "AlreadyRefunded" in out

    status, out = await toolbridge("trace", "nope", "--journal", str(journal), "--follow")
    assert status == 2
    assert "no run 'nope'" in out
    status, out = await toolbridge("trace", "order-42", "--journal", str(journal), "--follow", "--json")
    assert status == 2
    assert "does not combine with --json" in out


async def _windows(journal: Path) -> int:
    reader = SQLiteJournal(journal)
    await reader.open()
    try:
        (paid,) = [step for step in await reader.load_steps("order-42") if step.name == "paid"]
    finally:
        await reader.close()
    return sum(1 for entry in paid.attempt_log if "window" in entry)


HOLDER = """
import asyncio, sys
from toolbridge import Bridge

def wait_for_gate():
    with open(sys.argv[2]) as gate:
        gate.read()
    return "shipped"

async def main():
    async with Bridge(journal=sys.argv[1]) as bridge, bridge.run("follow-1") as step:
        await step.run("prepare", lambda: "ready")
        print("entered", flush=True)
        await step.run("ship", wait_for_gate)

asyncio.run(main())
"""


async def _line_with(stream: asyncio.StreamReader, *words: str) -> str:
    while True:
        line = (await asyncio.wait_for(stream.readline(), WAIT)).decode()
        assert line, f"the output ended before a line with {words}"
        if all(word in line for word in words):
            return line


async def test_follow_redraws_until_a_run_in_another_process_ends(tmp_path: Path) -> None:
    journal, gate = tmp_path / "follow.db", tmp_path / "gate"
    os.mkfifo(gate)
    (tmp_path / "holder.py").write_text(textwrap.dedent(HOLDER))
    holder = await asyncio.create_subprocess_exec(
        sys.executable, str(tmp_path / "holder.py"), str(journal), str(gate), stdout=asyncio.subprocess.PIPE
    )
    follow = None
    try:
        assert holder.stdout is not None
        await _line_with(holder.stdout, "entered")
        follow = await asyncio.create_subprocess_exec(
            TOOLBRIDGE,
            "trace",
            "follow-1",
            "--follow",
            "--journal",
            str(journal),
            stdout=asyncio.subprocess.PIPE,
        )
        assert follow.stdout is not None
        await _line_with(follow.stdout, "run follow-1", "running")
        await _line_with(follow.stdout, "ship", "running")
        await open_gate(tmp_path)
        assert await asyncio.wait_for(holder.wait(), WAIT) == 0
        await _line_with(follow.stdout, "run follow-1", "completed")
        rest = (await asyncio.wait_for(follow.stdout.read(), WAIT)).decode()
        assert await asyncio.wait_for(follow.wait(), WAIT) == 0, "follow ends when the run does"
        assert '"shipped"' in rest
    finally:
        await stop(holder)
        if follow is not None:
            await stop(follow)
