"""A durable call on PostgreSQL beside the same call on SQLite, interleaved in one run.

The subject is the issue's: a sandboxed command (``clients/python_client.py``) calling a sync
``echo`` tool through the daemon, pacing off (``UNPACED``), every call validated, journaled
and committed before its answer: p50 of sequential calls (one caller) and calls/s with 32
callers, with the journal in a SQLite file and in PostgreSQL (a throwaway cluster on this
machine, fsync on, reached through its Unix socket), at each durability level as documented:
``"normal"`` (SQLite ``synchronous=NORMAL``, PostgreSQL ``synchronous_commit=off``) and
``"full"`` (an fsync per commit on both). Rounds alternate which journal goes first; each
figure is the median over the rounds, and each ratio the median of the rounds' ratios.
Targets (issue 35): PostgreSQL p50 at most 1.3x SQLite's, calls/s at least 0.8x.

The machine's load average is printed: other work on the same cores moves every figure.

Usage: python bench/pg_pace.py [--rounds 3] [--sequential 1000] [--per-caller 60]
       [--durability normal full] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from call_latency import CLIENTS, UNPACED

from toolbridge import Bridge
from toolbridge._journal.base import Durability

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.pg_cluster import Cluster, running_cluster

CALLERS = 32
JOURNALS = ("SQLite", "PostgreSQL")
MEANING: dict[str, dict[str, str]] = {
    "normal": {"SQLite": "synchronous=NORMAL", "PostgreSQL": "synchronous_commit=off"},
    "full": {"SQLite": "synchronous=FULL", "PostgreSQL": "synchronous_commit=on"},
}


def _echo(value: Any) -> Any:
    return value


async def one_command(journal: str, durability: Durability, args: argparse.Namespace) -> dict[str, float]:
    argv = [
        "python3",
        str(CLIENTS / "python_client.py"),
        str(args.sequential),
        str(args.per_caller),
        str(CALLERS),
    ]
    async with Bridge(journal=journal, durability=durability) as bridge, bridge.run("pace") as step:
        result = await step.sandbox.commands.run(
            "agent", argv, tools={"echo": _echo}, tool_options=UNPACED, timeout=600
        )
    if result.exit_code != 0:
        raise RuntimeError(f"the client failed:\n{result.stderr}")
    report = json.loads(result.stdout)
    concurrent = report["concurrent"]
    return {
        "p50_ms": statistics.median(report["sequential_ms"]),
        "calls_per_s": concurrent["calls"] / concurrent["seconds"],
    }


async def one_round(
    cluster: Cluster, work: Path, number: int, args: argparse.Namespace
) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = {}
    for durability in args.durability:
        order = JOURNALS if number % 2 == 0 else JOURNALS[::-1]
        for label in order:
            journal = str(work / f"{durability}.db") if label == "SQLite" else cluster.create_database()
            figures[f"{label} {durability}"] = await one_command(journal, durability, args)
    return figures


def render(rounds: list[dict[str, dict[str, float]]], args: argparse.Namespace, load: list[float]) -> str:
    def median(key: str, field: str) -> float:
        return statistics.median(r[key][field] for r in rounds)

    def ratio(durability: str, field: str) -> float:
        return statistics.median(
            r[f"PostgreSQL {durability}"][field] / r[f"SQLite {durability}"][field] for r in rounds
        )

    lines = [
        f"PostgreSQL at SQLite's pace: a sandboxed command, sync tool, pacing off; medians of "
        f"{len(rounds)} rounds ({args.sequential} sequential calls; {CALLERS} callers x {args.per_caller})",
        f"load average before / after: {load[0]:.1f} / {load[1]:.1f} on {os.cpu_count()} cores",
        f"{'durability':<12}{'SQLite p50':>12}{'PG p50':>10}{'ratio':>8}"
        f"{'SQLite c/s':>12}{'PG c/s':>10}{'ratio':>8}",
    ]
    for durability in args.durability:
        lines.append(
            f"{durability:<12}{median(f'SQLite {durability}', 'p50_ms'):>12.3f}"
            f"{median(f'PostgreSQL {durability}', 'p50_ms'):>10.3f}{ratio(durability, 'p50_ms'):>8.2f}"
            f"{median(f'SQLite {durability}', 'calls_per_s'):>12.0f}"
            f"{median(f'PostgreSQL {durability}', 'calls_per_s'):>10.0f}"
            f"{ratio(durability, 'calls_per_s'):>8.2f}"
        )
    lines.append(
        "p50 in ms; c/s = calls/s with 32 callers; ratio = PostgreSQL / SQLite "
        "(target: p50 <= 1.3, c/s >= 0.8)"
    )
    for durability in args.durability:
        lines.append(
            f"  {durability}: SQLite {MEANING[durability]['SQLite']}, "
            f"PostgreSQL {MEANING[durability]['PostgreSQL']}"
        )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sequential", type=int, default=1000)
    parser.add_argument("--per-caller", type=int, default=60)
    parser.add_argument("--durability", nargs="+", choices=list(MEANING), default=list(MEANING))
    parser.add_argument("--json", action="store_true", help="print the rounds as JSON")
    args = parser.parse_args()
    load = [os.getloadavg()[0]]
    rounds = []
    with running_cluster(durable=True) as cluster:
        for number in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix="toolbridge-pace-") as work:
                rounds.append(await one_round(cluster, Path(work), number, args))
    load.append(os.getloadavg()[0])
    if args.json:
        json.dump({"load": load, "rounds": rounds}, sys.stdout)
        return
    print(render(rounds, args, load))


if __name__ == "__main__":
    asyncio.run(main())
