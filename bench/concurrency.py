"""Throughput as callers and commands grow, and one command's p99 beside a flooding neighbour.

Every command is a sandboxed Python client calling a sync ``echo`` tool through the daemon
(validated, journaled in SQLite, committed before the answer):

- calls/s with 1, 8, 32 and 128 callers in one command;
- calls/s with 1, 4 and 16 commands of 8 callers each, run at once (once every command has
  started and warmed up, all start calling together: their calls summed over the slowest
  command's time), and with 4 and 16 again without the busy share (the scheduler
  swapped for one whose shares stay small while every command is busy: the rule before
  ``fairness.BUSY_SHARE``);
- the sequential p50/p99 of one command alone, and again while a neighbour command floods
  the daemon with 32 callers: with fair shares (the default), without them (the baseline:
  the scheduler swapped for one that never limits), and with the flooder paced at
  ``FLOOD_RATE`` calls/s (``ToolOptions.max_call_rate``); with the flood's calls/s beside.

Each figure is the median over the rounds.

Usage: python bench/concurrency.py [--rounds 3] [--calls 1600] [--neighbour-only] [--uvloop] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from call_latency import CLIENTS, UNPACED, _percentile

from toolbridge import Bridge, Step, ToolOptions
from toolbridge._calls import fairness

CALLERS = (1, 8, 32, 128)
COMMANDS = (1, 4, 16)
# 128 callers at once must fit a per-command limit on calls in flight, where there is one.
_LIMITS = {f.name for f in dataclasses.fields(ToolOptions)}
_IN_FLIGHT = {"max_in_flight": 256} if "max_in_flight" in _LIMITS else {}
OPTIONS = dataclasses.replace(UNPACED, **_IN_FLIGHT)  # the flood row paced at FLOOD_RATE sets its own
FLOOD_RATE = 300.0
FLOOD_HEAD_START = 0.5
NO_LIMIT = 1 << 30
FLOODS: dict[str, tuple[fairness.FairShare | None, ToolOptions]] = {
    "beside a flood": (None, OPTIONS),
    "beside a flood, no fair shares": (fairness.FairShare(shared=NO_LIMIT, floor=NO_LIMIT), OPTIONS),
    f"beside a flood paced at {FLOOD_RATE:.0f}/s": (
        None,
        dataclasses.replace(OPTIONS, max_call_rate=FLOOD_RATE),
    ),
}


def _echo(value: Any) -> Any:
    return value


async def _client(
    step: Step,
    name: str,
    sequential: int,
    per_caller: int,
    callers: int,
    options: ToolOptions = OPTIONS,
    barrier: asyncio.Barrier | None = None,
) -> dict[str, Any]:
    """Run the benchmark client as a command; with ``barrier``, its callers start once every
    command sharing the barrier has reached it."""
    argv = ["python3", str(CLIENTS / "python_client.py"), str(sequential), str(per_caller), str(callers)]
    tools: dict[str, Any] = {"echo": _echo}
    if barrier is not None:

        async def reached() -> None:
            await barrier.wait()

        argv.append("barrier")
        tools["barrier"] = reached
    result = await step.sandbox.commands.run(
        name,
        argv,
        tools=tools,
        tool_options=options,
        timeout=600,
    )
    if result.exit_code != 0:
        raise RuntimeError(f"{name} failed:\n{result.stderr}")
    return dict(json.loads(result.stdout))


async def _round(args: argparse.Namespace, work: Path, turn: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    async with Bridge(journal=work / "bench.db") as bridge, bridge.run("concurrency") as step:
        if not args.neighbour_only:
            await _throughput(args, step, figures)
        await _neighbour(args, step, figures, turn)
    return figures


@contextlib.contextmanager
def _scheduler(scheduler: fairness.FairShare | None) -> Iterator[None]:
    """The running loop's fair-share scheduler swapped for ``scheduler`` (``None``: as it is)."""
    loop = asyncio.get_running_loop()
    default = fairness.fair_share()
    if scheduler is not None:
        fairness._by_loop[loop] = scheduler
    try:
        yield
    finally:
        fairness._by_loop[loop] = default


async def _commands(args: argparse.Namespace, step: Step, commands: int, name: str) -> float:
    """Calls/s of ``commands`` commands of 8 callers each, run at once."""
    per_caller = max(1, args.calls // (commands * 8))
    together = asyncio.Barrier(commands)  # sandboxes start one by one: their calls start at once
    reports = await asyncio.gather(
        *(
            _client(step, f"{name}-{commands}-{i}", 0, per_caller, 8, barrier=together)
            for i in range(commands)
        )
    )
    calls = sum(int(r["concurrent"]["calls"]) for r in reports)
    return calls / max(float(r["concurrent"]["seconds"]) for r in reports)


async def _throughput(args: argparse.Namespace, step: Step, figures: dict[str, float]) -> None:
    for callers in CALLERS:
        report = await _client(step, f"callers-{callers}", 0, max(1, args.calls // callers), callers)
        concurrent = report["concurrent"]
        figures[f"1 command x {callers} callers"] = concurrent["calls"] / concurrent["seconds"]
    for commands in COMMANDS:
        figures[f"{commands} commands x 8 callers"] = await _commands(args, step, commands, "commands")
    for commands in COMMANDS[1:]:
        with _scheduler(fairness.FairShare(busy=None)):
            rate = await _commands(args, step, commands, "small-shares")
        figures[f"{commands} commands x 8 callers, without the busy share"] = rate


async def _neighbour(args: argparse.Namespace, step: Step, figures: dict[str, float], turn: int) -> None:
    """The quiet command's p50/p99 alone and beside each kind of flood, in one bridge."""
    alone = await _client(step, "quiet-alone", args.calls // 4, 0, 0)
    reports: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = [("alone", alone, None)]
    floods = list(FLOODS.items())
    floods = floods[turn % len(floods) :] + floods[: turn % len(floods)]  # each round, another first
    for number, (label, (scheduler, options)) in enumerate(floods):
        with _scheduler(scheduler):
            # 32 callers, sized to go on for longer than the quiet command measures, and
            # given a head start past its sandbox's start and its warm-up.
            flood = asyncio.ensure_future(_client(step, f"flood-{number}", 0, args.calls // 8, 32, options))
            await asyncio.sleep(FLOOD_HEAD_START)
            beside = await _client(step, f"quiet-{number}", args.calls // 4, 0, 0)
            flooded = await flood
        reports.append((label, beside, flooded))
    for label, report, flood_report in reports:
        figures[f"p50 ms, {label}"] = statistics.median(report["sequential_ms"])
        figures[f"p99 ms, {label}"] = _percentile(report["sequential_ms"], 0.99)
        if flood_report is not None:
            concurrent = flood_report["concurrent"]
            figures[f"flood calls/s, {label}"] = concurrent["calls"] / concurrent["seconds"]


async def measure(args: argparse.Namespace) -> list[dict[str, float]]:
    rounds = []
    for turn in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="toolbridge-concurrency-") as work:
            rounds.append(await _round(args, Path(work), turn))
    return rounds


def render(rounds: list[dict[str, float]]) -> str:
    def median(name: str) -> float:
        return statistics.median(r[name] for r in rounds)

    lines = []
    throughput = [name for name in rounds[0] if " callers" in name]
    if throughput:
        lines += ["| measure | calls/s |", "| --- | ---: |"]
        lines += [f"| {name} | {median(name):,.0f} |" for name in throughput]
        lines.append("")
    lines += ["| the quiet command | p50 ms | p99 ms | the flood's calls/s |", "| --- | ---: | ---: | ---: |"]
    for label in ("alone", *FLOODS):
        flood = f"flood calls/s, {label}"
        rate = f"{median(flood):,.0f}" if flood in rounds[0] else ""
        p50, p99 = median(f"p50 ms, {label}"), median(f"p99 ms, {label}")
        lines.append(f"| {label} | {p50:.3f} | {p99:.3f} | {rate} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=1600)
    parser.add_argument("--neighbour-only", action="store_true", help="only the neighbour's p50/p99")
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
