"""Throughput as callers and commands grow, and one command's p99 beside a flooding neighbour.

Every command is a sandboxed Python client calling a sync ``echo`` tool through the daemon
(validated, journaled in SQLite, committed before the answer):

- calls/s with 1, 8, 32 and 128 callers in one command;
- calls/s with 1, 4 and 16 commands of 8 callers each, run at once (their calls summed over
  the slowest command's time);
- the sequential p50/p99 of one command alone, and again while a neighbour command floods
  the daemon with 32 callers.

Each figure is the median over the rounds.

Usage: python bench/concurrency.py [--rounds 3] [--calls 1600] [--uvloop] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from call_latency import CLIENTS, _percentile

from toolbridge import Bridge, Step, ToolOptions

CALLERS = (1, 8, 32, 128)
COMMANDS = (1, 4, 16)
# 128 callers at once must fit a per-command limit on calls in flight, where there is one.
_LIMITS = {f.name for f in dataclasses.fields(ToolOptions)}
_IN_FLIGHT = {"max_in_flight": 256} if "max_in_flight" in _LIMITS else {}
OPTIONS = ToolOptions(max_calls=10_000_000, **_IN_FLIGHT)


def _echo(value: Any) -> Any:
    return value


async def _client(step: Step, name: str, sequential: int, per_caller: int, callers: int) -> dict[str, Any]:
    result = await step.sandbox.commands.run(
        name,
        ["python3", str(CLIENTS / "python_client.py"), str(sequential), str(per_caller), str(callers)],
        tools={"echo": _echo},
        tool_options=OPTIONS,
        timeout=600,
    )
    if result.exit_code != 0:
        raise RuntimeError(f"{name} failed:\n{result.stderr}")
    return dict(json.loads(result.stdout))


async def _round(args: argparse.Namespace, work: Path) -> dict[str, float]:
    figures: dict[str, float] = {}
    async with Bridge(journal=work / "bench.db") as bridge, bridge.run("concurrency") as step:
        for callers in CALLERS:
            report = await _client(step, f"callers-{callers}", 0, max(1, args.calls // callers), callers)
            concurrent = report["concurrent"]
            figures[f"1 command x {callers} callers"] = concurrent["calls"] / concurrent["seconds"]
        for commands in COMMANDS:
            per_caller = max(1, args.calls // (commands * 8))
            reports = await asyncio.gather(
                *(_client(step, f"commands-{commands}-{i}", 0, per_caller, 8) for i in range(commands))
            )
            calls = sum(r["concurrent"]["calls"] for r in reports)
            slowest = max(r["concurrent"]["seconds"] for r in reports)
            figures[f"{commands} commands x 8 callers"] = calls / slowest
        alone = await _client(step, "quiet-alone", args.calls // 4, 0, 0)
        flood = asyncio.ensure_future(_client(step, "flood", 0, args.calls // 4, 32))
        beside = await _client(step, "quiet-beside", args.calls // 4, 0, 0)
        await flood
        for label, report in (("alone", alone), ("beside a flood", beside)):
            figures[f"p50 ms, {label}"] = statistics.median(report["sequential_ms"])
            figures[f"p99 ms, {label}"] = _percentile(report["sequential_ms"], 0.99)
    return figures


async def measure(args: argparse.Namespace) -> list[dict[str, float]]:
    rounds = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="toolbridge-concurrency-") as work:
            rounds.append(await _round(args, Path(work)))
    return rounds


def render(rounds: list[dict[str, float]]) -> str:
    lines = ["| measure | value |", "| --- | ---: |"]
    for name in rounds[0]:
        value = statistics.median(r[name] for r in rounds)
        latency = name.startswith("p")
        lines.append(f"| {name if latency else name + ', calls/s'} | {value:,.{3 if latency else 0}f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=1600)
    parser.add_argument("--uvloop", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.uvloop:
        import uvloop

        rounds = uvloop.run(measure(args))
    else:
        rounds = asyncio.run(measure(args))
    if args.json:
        json.dump(rounds, sys.stdout)
        return
    print(f"concurrency: sync echo tool, about {args.calls} calls a measure; medians of {args.rounds} rounds")
    print(render(rounds))


if __name__ == "__main__":
    main()
