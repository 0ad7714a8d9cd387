"""What the run's state (``ctx.state``) costs a tool call: unused, and written by every call.

Calls go through ``toolbridge.testing.ToolHarness``: the daemon's own call path from the bytes
a sandbox sends to the outcome committed in a real SQLite journal, without the gRPC hop (which
would only add the same constant to every subject). Subjects, interleaved in rotating order:

- ``baseline``: a ``tool.step`` that ignores its context, with the state's recording switched
  off (``RunMemory.recorder`` patched to record nothing): the call path as before the feature;
- ``unused``: the same tool, recording on (what every call now pays when no tool uses state);
- ``writes``: a tool that sets ``ctx.state["n"]`` on every call (its change is journaled with
  its step).

Each figure is the median over the rounds of calls/s (sequential calls, one run); ratios are
medians of each round's ratio to ``baseline``.

Usage: python bench/run_state.py [--rounds 7] [--calls 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from toolbridge import ToolContext, tool
from toolbridge._durable.memory import RunMemory
from toolbridge._records import StepRecord
from toolbridge.testing import ToolHarness

SUBJECTS = ("baseline", "unused", "writes")


def _plain(args: dict[str, Any]) -> int:
    return int(args["i"])


def _writes(args: dict[str, Any], ctx: ToolContext) -> int:
    ctx.state["n"] = args["i"]
    return int(args["i"])


async def _rate(subject: str, calls: int) -> float:
    run = tool.step(run=_writes if subject == "writes" else _plain)
    original = RunMemory.recorder
    if subject == "baseline":

        def nothing(self: RunMemory) -> Callable[[StepRecord], None] | None:
            return None

        RunMemory.recorder = nothing  # type: ignore[assignment,method-assign]
    try:
        async with ToolHarness({"t": run}, command=None) as harness:
            started = time.perf_counter()
            for i in range(calls):
                await harness.call("t", i=i)
            return calls / (time.perf_counter() - started)
    finally:
        RunMemory.recorder = original  # type: ignore[method-assign]


async def main(rounds: int, calls: int) -> None:
    rates: dict[str, list[float]] = {subject: [] for subject in SUBJECTS}
    for number in range(rounds):
        order = SUBJECTS[number % len(SUBJECTS) :] + SUBJECTS[: number % len(SUBJECTS)]
        for subject in order:
            rates[subject].append(await _rate(subject, calls))
    print(f"{'subject':<10} {'calls/s':>10} {'vs baseline':>12}   ({rounds} rounds x {calls} calls)")
    for subject in SUBJECTS:
        ratio = statistics.median(r / b for r, b in zip(rates[subject], rates["baseline"], strict=True))
        print(f"{subject:<10} {statistics.median(rates[subject]):>10.0f} {ratio:>11.3f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2000)
    options = parser.parse_args()
    asyncio.run(main(options.rounds, options.calls))
