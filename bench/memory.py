"""Memory of a long run: the daemon's RSS after N tool calls in one open run (issue 14, item 4).

A long-lived run makes call after call in one run. Two ways are measured:

- ``one-run``: a host looping on ``bridge.call_tool`` inside one open ``bridge.run``;
- ``one-token``: a sidecar token's calls, made by a client process over the daemon's socket
  (as a container would make them), so that one command scope lives for all of them.

The baseline, in the same run of the bench: as many calls, each in a run of its own (its
memory is let go when the run ends). Each is measured in a fresh process, so that none reuses
memory another freed. The bench prints the daemon's RSS at each checkpoint, the slope per
call between the first checkpoint and the last, and the time per call over the first and the
last stretch (a per-call cost that grew with the run would show there).

Usage: python bench/memory.py [--checkpoints 10000] [--million] [--only-modes one-run,...]
       --million: checkpoints 10,000, 100,000 and 1,000,000 (about an hour in all on 2 cores)
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
import time
import uuid
from pathlib import Path
from typing import Any

from toolbridge import Bridge

PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 1024 * 1024
BATCH = 32  # calls in flight at once: the bench measures memory, so it need not wait for each
MODES = {
    "run-per-call": "baseline: a run per call",
    "one-run": "one run, host calls",
    "one-token": "one run, a sidecar token",
}

CLIENT = """
import asyncio, sys
from inngest_tools import tools

async def caller(first, step, total):
    for n in range(first, total, step):
        await tools.ping(n)

async def main(total, callers):
    await asyncio.gather(*(caller(first, callers, total) for first in range(callers)))

asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
"""

Figures = list[tuple[int, float, float]]  # (calls, RSS MiB, seconds since the start)


def rss() -> float:
    """This process's resident set, in MiB."""
    gc.collect()
    return int(Path("/proc/self/statm").read_text().split()[1]) * PAGE / MIB


class Checkpoints:
    """Notes the RSS and the time when the count of calls reaches each checkpoint."""

    def __init__(self, checkpoints: list[int]) -> None:
        self.due = list(checkpoints)
        self.started = time.perf_counter()
        self.figures: Figures = [(0, rss(), 0.0)]
        self.calls = 0

    def count(self) -> None:
        self.calls += 1
        if self.due and self.calls >= self.due[0]:
            self.due.pop(0)
            self.figures.append((self.calls, rss(), time.perf_counter() - self.started))


async def host_calls(bridge: Bridge, total: int, *, one_run: bool) -> None:
    run_id = "long-" + uuid.uuid4().hex
    async with bridge.run(run_id) if one_run else contextlib.AsyncExitStack():
        for start in range(0, total, BATCH):
            # Distinct arguments: in one run, the same call again would be a replay of the first.
            await asyncio.gather(
                *(
                    bridge.call_tool("ping", {"n": n}, run_id=run_id if one_run else None)
                    for n in range(start, min(start + BATCH, total))
                )
            )


async def token_calls(bridge: Bridge, total: int, work: Path) -> None:
    minted = await bridge.mint_token(run_id="long-token", tools=["ping"], max_calls=total + 1, ttl=86400)
    assert minted.token is not None
    script = work / "client.py"
    script.write_text(CLIENT)
    environment = {"TOOLBRIDGE_ADDRESS": bridge.address, "TOOLBRIDGE_TOKEN": minted.token}
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(script), str(total), str(BATCH), env={**os.environ, **environment}
    )
    if await process.wait() != 0:
        raise RuntimeError("the sidecar client failed")


async def measure(mode: str, checkpoints: list[int]) -> Figures:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        marks = Checkpoints(checkpoints)

        def ping(n: int) -> int:
            marks.count()
            return n

        async with Bridge(journal=work / "memory.db", tools={"ping": ping}) as bridge:
            if mode == "one-token":
                await token_calls(bridge, checkpoints[-1], work)
            else:
                await host_calls(bridge, checkpoints[-1], one_run=mode == "one-run")
        return marks.figures


def report(label: str, figures: Figures) -> None:
    (first_calls, first, first_at), (last_calls, last, last_at) = figures[1], figures[-1]
    slope = (last - first) * MIB / max(1, last_calls - first_calls)
    points = "  ".join(f"{calls:>9,} calls: {mib:6.1f} MiB" for calls, mib, _ in figures[1:])
    early = first_at / first_calls * 1000
    late = (last_at - figures[-2][2]) / max(1, last_calls - figures[-2][0]) * 1000
    print(
        f"{label:<26} {points}   slope {slope:6.1f} B/call   "
        f"ms/call first {early:.2f} last {late:.2f}   wall {last_at:,.0f} s",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoints", default="2000,10000")
    parser.add_argument("--million", action="store_true", help="checkpoints 10k, 100k and 1M")
    parser.add_argument("--only-modes", default=",".join(MODES), help="a comma-separated subset")
    parser.add_argument("--only", choices=list(MODES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    spec = "10000,100000,1000000" if args.million else args.checkpoints
    checkpoints = [int(n) for n in spec.split(",")]
    if args.only is not None:  # one measurement, in a fresh process: no memory left by another
        print(json.dumps(asyncio.run(measure(args.only, checkpoints))))
        return
    print(f"RSS of the daemon's process after N calls ({BATCH} in flight at once); each in a fresh process")
    for mode in args.only_modes.split(","):
        command = [sys.executable, __file__, "--checkpoints", spec, "--only", mode]
        found: Any = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
        report(MODES[mode], [(calls, mib, at) for calls, mib, at in found])


if __name__ == "__main__":
    main()
