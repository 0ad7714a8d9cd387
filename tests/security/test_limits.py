"""A fork bomb, a memory hog and other greedy code are contained, and the daemon keeps
serving other commands meanwhile.

Limits here are tight (at most 64 processes, 96 MiB) so that nothing hurts a shared machine.
Sandbox and host share CLOCK_MONOTONIC (bubblewrap makes no time namespace), so the sandbox
reports when it was at its limit and the test checks that another command ran, whole,
inside that window: no sleeping in the test, no guessing.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from toolbridge import Bridge, CommandResult
from toolbridge._sandbox.bwrap.cgroups import available_parents
from toolbridge._sandbox.bwrap.launcher import BwrapLauncher, SandboxLimits

MIB = 1024 * 1024
HOLD_SECONDS = 4.0
"""How long greedy code stays at its limit, inside the sandbox, while others run."""

FORK_BOMB = """
import errno, json, os, sys, time
hold = float(sys.argv[1])
children = 0
failure = None
while failure is None:
    try:
        if os.fork() == 0:
            # Every child keeps forking too, then waits to be killed with the sandbox.
            while True:
                try:
                    if os.fork() == 0:
                        time.sleep(600)
                except OSError:
                    time.sleep(600)
        children += 1
    except OSError as exc:
        failure = errno.errorcode[exc.errno]
saturated = time.monotonic()
refused = 0
while time.monotonic() < saturated + hold:
    try:
        if os.fork() == 0:
            os._exit(0)
    except OSError:
        refused += 1
    time.sleep(0.01)
print(json.dumps({"children": children, "failure": failure, "refused": refused,
                  "saturated": saturated, "released": time.monotonic()}))
"""

MEMORY_HOG = """
import json, sys, time
limit, hold = int(sys.argv[1]), float(sys.argv[2])
chunks = []
while len(chunks) * 4 < limit * 3 // 4:
    chunks.append(bytearray(4 * 1024 * 1024))  # zero-filled, so really resident
high = time.monotonic()
print(json.dumps({"high": high}), flush=True)
while time.monotonic() < high + hold:
    time.sleep(0.01)
print(json.dumps({"released": time.monotonic()}), flush=True)
while True:
    chunks.append(bytearray(4 * 1024 * 1024))
    print(json.dumps({"allocated_mib": len(chunks) * 4}), flush=True)
"""


async def _run_others_meanwhile(
    bridge: Bridge, work_dir: Path, greedy: asyncio.Future[CommandResult]
) -> list[tuple[float, float]]:
    """Run short commands one after another until the greedy one ends; their time spans."""
    spans: list[tuple[float, float]] = []
    async with bridge.run() as step:
        while not greedy.done():
            started = time.monotonic()
            result = await step.sandbox.commands.run(
                "other", ["python3", "-c", "print('served')"], cwd=work_dir, timeout=60
            )
            finished = time.monotonic()
            assert result.exit_code == 0, result.stderr
            assert result.stdout == "served\n"
            spans.append((started, finished))
    return spans


def _inside(spans: list[tuple[float, float]], start: float, end: float) -> int:
    return sum(1 for begun, ended in spans if start < begun and ended < end)


async def test_fork_bomb_is_contained_while_another_command_is_served(
    journal_path: Path, tmp_path: Path, work_dir: Path, write_script: Callable[[str, str], Path]
) -> None:
    write_script("bomb.py", FORK_BOMB)
    limits = SandboxLimits(memory=256 * MIB, processes=32, cpu_time=60)
    async with (
        Bridge(journal=journal_path, sandbox=BwrapLauncher(limits=limits)) as bomber,
        Bridge(journal=tmp_path / "other.db", sandbox="bwrap") as other,
        bomber.run("bomb") as step,
    ):
        argv = ["python3", "bomb.py", str(HOLD_SECONDS)]
        bomb = asyncio.ensure_future(step.sandbox.commands.run("bomb", argv, cwd=work_dir, timeout=60))
        spans = await _run_others_meanwhile(other, work_dir, bomb)
        result = await bomb
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["failure"] == "EAGAIN"  # fork refused by the kernel at the limit
    assert report["children"] < 32
    assert report["refused"] > 0
    if "pids" in available_parents():
        assert "the sandbox reached its process limit (32)" in result.stderr
    assert _inside(spans, report["saturated"], report["released"]) >= 1, (spans, report)


async def test_memory_hog_is_killed_at_its_limit_while_another_command_is_served(
    journal_path: Path, tmp_path: Path, work_dir: Path, write_script: Callable[[str, str], Path]
) -> None:
    write_script("hog.py", MEMORY_HOG)
    memory = 96 * MIB
    limits = SandboxLimits(memory=memory, processes=32, cpu_time=60)
    argv = ["python3", "hog.py", str(memory // MIB), str(HOLD_SECONDS)]
    async with (
        Bridge(journal=journal_path, sandbox=BwrapLauncher(limits=limits)) as hogger,
        Bridge(journal=tmp_path / "other.db", sandbox="bwrap") as other,
        hogger.run("hog") as step,
    ):
        hog = asyncio.ensure_future(step.sandbox.commands.run("hog", argv, cwd=work_dir, timeout=60))
        spans = await _run_others_meanwhile(other, work_dir, hog)
        result = await hog
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    high, released = lines[0]["high"], lines[1]["released"]
    allocated = [line["allocated_mib"] for line in lines[2:]]
    if "memory" in available_parents():
        assert result.exit_code == -signal.SIGKILL  # the kernel's OOM killer, in its cgroup
        assert "the sandbox reached its memory limit (96 MiB)" in result.stderr
    else:
        assert "MemoryError" in result.stderr  # the address-space rlimit instead
    assert max(allocated, default=0) <= memory // MIB
    assert _inside(spans, high, released) >= 1, (spans, high, released)


OPEN_FILES = """
import errno, json
handles = []
try:
    while True:
        handles.append(open("/dev/null"))
except OSError as exc:
    print(json.dumps({"opened": len(handles), "failure": errno.errorcode[exc.errno]}))
"""

FILL_TMP = """
import errno, json
written = 0
try:
    with open("/tmp/fill", "wb") as handle:
        while True:
            handle.write(b"x" * 65536)
            handle.flush()
            written += 65536
except OSError as exc:
    print(json.dumps({"written": written, "failure": errno.errorcode[exc.errno]}))
"""

BIG_FILE = """
import errno, json
try:
    with open("/tmp/big", "wb") as handle:
        handle.write(b"x" * (2 * 1024 * 1024))
    print(json.dumps({"failure": None}))
except OSError as exc:
    print(json.dumps({"failure": errno.errorcode[exc.errno]}))
"""


@pytest.mark.parametrize(
    ("code", "limits", "expected"),
    [
        pytest.param(OPEN_FILES, SandboxLimits(open_files=64), {"failure": "EMFILE"}, id="open-files"),
        pytest.param(FILL_TMP, SandboxLimits(tmp_size=2 * MIB), {"failure": "ENOSPC"}, id="tmp-size"),
        pytest.param(
            BIG_FILE, SandboxLimits(file_size=1 * MIB, tmp_size=8 * MIB), {"failure": "EFBIG"}, id="file-size"
        ),
    ],
)
async def test_per_process_limits_refuse_more(
    journal_path: Path,
    work_dir: Path,
    write_script: Callable[[str, str], Path],
    code: str,
    limits: SandboxLimits,
    expected: dict[str, str],
) -> None:
    write_script("greedy.py", code)
    async with (
        Bridge(journal=journal_path, sandbox=BwrapLauncher(limits=limits)) as bridge,
        bridge.run() as step,
    ):
        result = await step.sandbox.commands.run("greedy", "python3 greedy.py", cwd=work_dir, timeout=60)
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert {key: report[key] for key in expected} == expected
    if "opened" in report:
        assert report["opened"] < 64
    if "written" in report:
        assert report["written"] <= 2 * MIB


async def test_cpu_time_limit_stops_a_busy_loop(journal_path: Path, work_dir: Path) -> None:
    limits = SandboxLimits(cpu_time=1)
    async with (
        Bridge(journal=journal_path, sandbox=BwrapLauncher(limits=limits)) as bridge,
        bridge.run() as step,
    ):
        started = time.monotonic()
        result = await step.sandbox.commands.run(
            "spin", ["python3", "-c", "while True: pass"], cwd=work_dir, timeout=60
        )
    assert result.exit_code == -signal.SIGXCPU
    assert result.stopped is None  # the kernel stopped it, not the command's timeout
    assert time.monotonic() - started < 30
