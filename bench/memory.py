"""Memory of a long run: the host's RSS after N tool calls in one open run (issue 14, item 4).

A long-lived run (a sidecar token's, or a host looping on ``bridge.call_tool``) makes call
after call in one run. The bench makes host calls of a trivial tool inside one open run and
prints the RSS at each checkpoint and the slope per call between the first and the last. The
baseline, in the same run of the bench: as many calls, each in a run of its own (its memory
is let go when the run ends). Each is measured in a fresh process, so that neither reuses
memory the other freed.

Usage: python bench/memory.py [--checkpoints 10000,50000,100000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from toolbridge import Bridge

PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 1024 * 1024


def rss() -> float:
    """This process's resident set, in MiB."""
    gc.collect()
    return int(Path("/proc/self/statm").read_text().split()[1]) * PAGE / MIB


def ping(n: int) -> int:
    return n


async def measure(bridge: Bridge, checkpoints: list[int], *, one_run: bool) -> list[tuple[int, float]]:
    figures = [(0, rss())]
    done = 0
    run_id = "long-" + uuid.uuid4().hex
    async with bridge.run(run_id) if one_run else contextlib.AsyncExitStack():
        for target in checkpoints:
            while done < target:
                # Distinct arguments: in one run, the same call again would be a replay of the first.
                await bridge.call_tool("ping", {"n": done}, run_id=run_id if one_run else None)
                done += 1
            figures.append((done, rss()))
    return figures


def report(label: str, figures: list[tuple[int, float]]) -> None:
    (first_calls, first), (last_calls, last) = figures[1], figures[-1]
    slope = (last - first) * MIB / max(1, last_calls - first_calls)
    points = "  ".join(f"{calls:>7,} calls: {mib:6.1f} MiB" for calls, mib in figures)
    print(f"{label:<28} {points}   slope {slope:7.1f} bytes/call")


async def measure_in_this_process(checkpoints: list[int], *, one_run: bool) -> list[tuple[int, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        async with Bridge(journal=Path(tmp) / "memory.db", tools={"ping": ping}) as bridge:
            return await measure(bridge, checkpoints, one_run=one_run)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoints", default="10000,50000,100000")
    parser.add_argument("--only", choices=["one-run", "run-per-call"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    checkpoints = [int(n) for n in args.checkpoints.split(",")]
    if args.only is not None:  # one measurement, in a fresh process: no memory left by the other
        print(json.dumps(asyncio.run(measure_in_this_process(checkpoints, one_run=args.only == "one-run"))))
        return
    for label, only in (("baseline: a run per call", "run-per-call"), ("one run, all the calls", "one-run")):
        command = [sys.executable, __file__, "--checkpoints", args.checkpoints, "--only", only]
        figures = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
        report(label, [(calls, mib) for calls, mib in figures])


if __name__ == "__main__":
    main()
