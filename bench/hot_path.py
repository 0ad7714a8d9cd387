"""A durable call beside a bare grpc.aio unary echo: a sync tool and an async tool, one run.

Every subject runs as a sandboxed command using the same runtime interpreter: the baseline
``raw-unary`` calls a bare grpc.aio unary echo served from the same event loop as the daemon,
and ``raw-stream`` the same echo as messages on one bidirectional stream (what a call costs
the transport alone, since the client multiplexes its calls over one stream);
``sync-tool`` and ``async-tool`` call an ``echo`` tool (a plain ``def`` and an ``async def``)
through the daemon, each call authenticated, validated, journaled in SQLite and committed
before the answer. Rounds interleave the subjects (in a rotating order); each figure is the
median over the rounds of the round's p50 (sequential calls, one caller) and calls/s (32
callers), and the ratios are medians of each round's ratio to ``raw-unary``.

Usage: python bench/hot_path.py [--rounds 7] [--sequential 1000] [--per-caller 60] [--callers 32]
       [--uvloop] [--json]       (BENCH_UVLOOP=1 in the environment also picks uvloop)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from call_latency import CLIENTS, UNPACED, _start_raw_echo

from toolbridge import Bridge

SUBJECTS = ("raw-unary", "raw-stream", "sync-tool", "async-tool")


def _echo_sync(value: Any) -> Any:
    return value


async def _echo_async(value: Any) -> Any:
    return value


TOOLS: dict[str, Callable[..., Any]] = {"sync-tool": _echo_sync, "async-tool": _echo_async}


def _figures(report: dict[str, Any]) -> dict[str, float]:
    concurrent = report["concurrent"]
    return {
        "p50_ms": statistics.median(report["sequential_ms"]),
        "calls_per_s": concurrent["calls"] / concurrent["seconds"],
    }


async def _round(args: argparse.Namespace, work: Path, order: list[str]) -> dict[str, dict[str, float]]:
    sizes = [str(args.sequential), str(args.per_caller), str(args.callers)]
    figures: dict[str, dict[str, float]] = {}
    async with Bridge(journal=work / "bench.db") as bridge, bridge.run("hot-path") as step:
        for subject in order:
            if subject.startswith("raw-"):
                raw = await _start_raw_echo(work / "raw.sock")
                try:
                    address = f"unix:{work / 'raw.sock'}"
                    mode = subject.removeprefix("raw-")
                    argv = ["python3", str(CLIENTS / "raw_echo_client.py"), address, mode]
                    result = await step.sandbox.commands.run(subject, [*argv, *sizes], timeout=600)
                finally:
                    await raw.stop(None)
            else:
                result = await step.sandbox.commands.run(
                    subject,
                    ["python3", str(CLIENTS / "python_client.py"), *sizes],
                    tools={"echo": TOOLS[subject]},
                    tool_options=UNPACED,
                    timeout=600,
                )
            if result.exit_code != 0:
                raise RuntimeError(f"{subject} failed:\n{result.stderr}")
            figures[subject] = _figures(json.loads(result.stdout))
    return figures


def summarize(rounds: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per subject: median p50, calls/s, and the medians of the rounds' ratios to raw-unary."""
    table = {}
    for name in SUBJECTS:

        def ratio(key: str, name: str = name) -> float:
            return statistics.median(r[name][key] / r["raw-unary"][key] for r in rounds)

        table[name] = {
            "p50_ms": statistics.median(r[name]["p50_ms"] for r in rounds),
            "calls_per_s": statistics.median(r[name]["calls_per_s"] for r in rounds),
            "p50_x": ratio("p50_ms"),
            "calls_x": ratio("calls_per_s"),
        }
    return table


def render(table: dict[str, dict[str, float]], *, rounds: int, callers: int) -> str:
    lines = [
        f"| subject | p50 ms | calls/s ({callers} callers) | p50 x unary (target <= 1.0) "
        "| calls/s x unary (target >= 1.0) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, row in table.items():
        lines.append(
            f"| {name} | {row['p50_ms']:.3f} | {row['calls_per_s']:.0f} "
            f"| {row['p50_x']:.2f} | {row['calls_x']:.2f} |"
        )
    lines.append(f"\nmedians of {rounds} interleaved rounds; x = ratio to raw-unary in the same round")
    return "\n".join(lines)


async def measure(args: argparse.Namespace) -> list[dict[str, dict[str, float]]]:
    rounds = []
    for number in range(args.rounds):
        turn = number % len(SUBJECTS)
        order = list(SUBJECTS[turn:] + SUBJECTS[:turn])
        with tempfile.TemporaryDirectory(prefix="toolbridge-hot-") as work:
            rounds.append(await _round(args, Path(work), order))
    return rounds


def parser() -> argparse.ArgumentParser:
    parsed = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parsed.add_argument("--rounds", type=int, default=7)
    parsed.add_argument("--sequential", type=int, default=1000)
    parsed.add_argument("--per-caller", type=int, default=60)
    parsed.add_argument("--callers", type=int, default=32)
    parsed.add_argument("--uvloop", action="store_true", help="run the daemon on uvloop")
    parsed.add_argument("--json", action="store_true", help="print the rounds as JSON")
    return parsed


def main() -> None:
    args = parser().parse_args()
    if args.uvloop or os.environ.get("BENCH_UVLOOP") == "1":
        import uvloop

        rounds = uvloop.run(measure(args))
    else:
        rounds = asyncio.run(measure(args))
    if args.json:
        json.dump(rounds, sys.stdout)
        return
    print(f"hot path: {args.sequential} sequential calls, {args.callers} callers x {args.per_caller} calls")
    print(render(summarize(rounds), rounds=args.rounds, callers=args.callers))


if __name__ == "__main__":
    main()
