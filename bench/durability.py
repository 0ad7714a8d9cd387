"""What durability costs and what replay saves, each beside its baseline in the same run.

1. Host steps: N fresh ``step.run`` steps, then the same run entered again from a new bridge
   (journal preloaded from disk), every step answered from memory. Steps per second.
2. Tool calls from a sandbox: N sequential calls made fresh, then made again by the re-run of
   that interrupted command, every one answered in the sandbox from the records the daemon
   hands it (client-side replay). Calls per second.
3. One durable call (journaled in SQLite) against the same call with ``journal=None``:
   p50 / p99 latency and calls per second with 32 concurrent callers.

Usage: python bench/durability.py [--rounds 3] [--steps 2000] [--calls 1000]

Each figure is the median over the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from call_latency import CLIENTS, _figures

from toolbridge import Bridge, ToolOptions

UNLIMITED = ToolOptions(max_calls=10_000_000)


async def host_steps(work: Path, steps: int) -> dict[str, float]:
    journal = work / "steps.db"

    async def entry() -> float:
        async with Bridge(journal=journal) as bridge:
            started = time.perf_counter()
            async with bridge.run("steps") as step:
                for index in range(steps):
                    await step.run(f"s{index}", lambda: {"ok": True})
            return time.perf_counter() - started

    fresh = await entry()
    replay = await entry()
    return {"fresh": steps / fresh, "replay": steps / replay}


async def tool_replay(work: Path, calls: int) -> dict[str, float]:
    journal = work / "calls.db"
    blocked = asyncio.Event()

    async def block() -> None:
        blocked.set()
        await asyncio.Event().wait()

    tools = {"echo": lambda value: value, "block": block}
    argv = ["python3", str(CLIENTS / "replay_client.py"), str(calls)]
    block_first = {"REPLAY_BLOCK": "1"}

    async def first() -> Any:
        async with Bridge(journal=journal) as bridge, bridge.run("calls") as step:
            return await step.sandbox.commands.run(
                "agent", argv, tools=tools, tool_options=UNLIMITED, env=block_first
            )

    task = asyncio.create_task(first())
    await blocked.wait()
    # The first entry's timing line is in the interrupted command's stdout, which is lost with
    # it; time the fresh calls again from a run of their own.
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    async with Bridge(journal=journal) as bridge:
        async with bridge.run("calls") as step:
            replayed = await step.sandbox.commands.run("agent", argv, tools=tools, tool_options=UNLIMITED)
        async with bridge.run("calls-fresh") as step:
            fresh = await step.sandbox.commands.run("agent", argv, tools=tools, tool_options=UNLIMITED)
    fresh_report, replay_report = json.loads(fresh.stdout), json.loads(replayed.stdout)
    return {"fresh": calls / fresh_report["seconds"], "replay": calls / replay_report["seconds"]}


async def journal_cost(work: Path, calls: int) -> dict[str, dict[str, float]]:
    results = {}
    argv = ["python3", str(CLIENTS / "python_client.py"), str(calls), str(max(1, calls // 32)), "32"]
    for label, journal in (("journal=None", None), ("SQLite journal", work / "cost.db")):
        async with Bridge(journal=journal) as bridge, bridge.run(f"cost-{label}") as step:
            result = await step.sandbox.commands.run(
                "agent", argv, tools={"echo": lambda value: value}, tool_options=UNLIMITED, timeout=600
            )
        results[label] = _figures(json.loads(result.stdout))
    return results


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    steps, calls, costs = [], [], []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="toolbridge-bench-") as work_dir:
            work = Path(work_dir)
            steps.append(await host_steps(work, args.steps))
            calls.append(await tool_replay(work, args.calls))
            costs.append(await journal_cost(work, args.calls))

    def median(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(row[key] for row in rows)

    print(f"durability: medians of {args.rounds} rounds")
    print(f"{'':<34}{'fresh /s':>10}{'replay /s':>11}{'replay x':>10}")
    for label, rows in ((f"host steps ({args.steps})", steps), (f"sandbox tool calls ({args.calls})", calls)):
        fresh, replay = median(rows, "fresh"), median(rows, "replay")
        print(f"{label:<34}{fresh:>10.0f}{replay:>11.0f}{replay / fresh:>10.2f}")
    print()
    print(f"{'one tool call':<34}{'p50 ms':>10}{'p99 ms':>11}{'calls/s':>10}")
    for label in ("journal=None", "SQLite journal"):
        figures = {key: statistics.median(cost[label][key] for cost in costs) for key in costs[0][label]}
        print(
            f"{label:<34}{figures['p50_ms']:>10.3f}{figures['p99_ms']:>11.3f}{figures['calls_per_s']:>10.0f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
