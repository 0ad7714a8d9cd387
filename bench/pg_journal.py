"""The journal on PostgreSQL beside the journal on SQLite, measured in the same run.

1. One durable tool call from a sandbox (``clients/python_client.py`` in a sandboxed command,
   calling ``echo``; every call validated, journaled and answered): p50 / p99 latency of
   sequential calls and calls per second with 32 concurrent callers, with the journal in a
   SQLite file and in PostgreSQL (a local throwaway cluster, fsync on), at both durability
   levels: ``"normal"`` survives a killed daemon (SQLite ``synchronous=NORMAL``, PostgreSQL
   ``synchronous_commit=off``), ``"full"`` a power loss too (an fsync per commit).
2. A fleet: 1, 2 and 4 daemon processes (``pg_fleet_host.py``) sharing one journal, each
   serving its own run's command with 32 concurrent callers, all started at once: calls per
   second of the whole fleet, on one PostgreSQL database and on one SQLite file.

This machine has 2 cores, shared by the daemons, their sandboxes and the database server, so
the fleet rows show how the journal scales under contention on one machine, not what a
fleet of separate hosts would do.

Usage: python bench/pg_journal.py [--rounds 3] [--calls 1000] [--fleet-calls 1600]

Each figure is the median over the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from call_latency import CLIENTS, _figures

from toolbridge import Bridge, ToolOptions
from toolbridge._journal.base import Durability

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.pg_cluster import Cluster, running_cluster

HERE = Path(__file__).resolve().parent
UNLIMITED = ToolOptions(max_calls=10_000_000)
CALLERS = 32
# Each durability level, and what it means for each journal.
DURABILITIES: dict[Durability, dict[str, str]] = {
    "normal": {"SQLite": "WAL, synchronous=NORMAL", "PostgreSQL": "synchronous_commit=off"},
    "full": {"SQLite": "WAL, synchronous=FULL", "PostgreSQL": "synchronous_commit=on"},
}


async def one_call(journal: str, calls: int, durability: Durability) -> dict[str, float]:
    argv = [
        "python3",
        str(CLIENTS / "python_client.py"),
        str(calls),
        str(max(1, calls // CALLERS)),
        str(CALLERS),
    ]
    async with Bridge(journal=journal, durability=durability) as bridge, bridge.run("one-call") as step:
        result = await step.sandbox.commands.run(
            "agent", argv, tools={"echo": lambda value: value}, tool_options=UNLIMITED, timeout=600
        )
    return _figures(json.loads(result.stdout))


async def fleet(journal: str, daemons: int, calls: int) -> float:
    """Calls per second of ``daemons`` processes sharing ``journal``, ``calls`` each."""
    per_caller = max(1, calls // CALLERS)
    hosts = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(HERE / "pg_fleet_host.py"),
            journal,
            f"fleet-{daemons}-{index}",
            str(per_caller),
            str(CALLERS),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for index in range(daemons)
    ]
    for host in hosts:
        assert host.stdout is not None
        assert (await host.stdout.readline()).strip() == b"ready"
    for host in hosts:
        assert host.stdin is not None
        host.stdin.write(b"go\n")
        await host.stdin.drain()
    reports: list[dict[str, Any]] = []
    for host in hosts:
        out, _ = await host.communicate()
        assert host.returncode == 0, f"a fleet daemon failed ({host.returncode})"
        reports.append(json.loads(out.splitlines()[-1]))
    # Each daemon's calls ran while the others' did (they started together): the fleet's
    # rate is the sum of theirs.
    return float(sum(r["concurrent"]["calls"] / r["concurrent"]["seconds"] for r in reports))


async def one_round(cluster: Cluster, work: Path, args: argparse.Namespace) -> dict[str, float]:
    figures: dict[str, float] = {}
    for durability in DURABILITIES:
        for label, journal in (
            ("SQLite", str(work / f"one-{durability}.db")),
            ("PostgreSQL", cluster.create_database()),
        ):
            for key, value in (await one_call(journal, args.calls, durability)).items():
                figures[f"{label} {durability} {key}"] = value
    for daemons in (1, 2, 4):
        figures[f"fleet PostgreSQL {daemons}"] = await fleet(
            cluster.create_database(), daemons, args.fleet_calls
        )
        figures[f"fleet SQLite {daemons}"] = await fleet(
            str(work / f"fleet-{daemons}.db"), daemons, args.fleet_calls
        )
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--fleet-calls", type=int, default=1600, help="calls per daemon in the fleet")
    args = parser.parse_args()
    rounds = []
    with running_cluster(durable=True) as cluster:
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix="toolbridge-bench-") as work_dir:
                rounds.append(await one_round(cluster, Path(work_dir), args))

    def median(key: str) -> float:
        return statistics.median(r[key] for r in rounds)

    print(f"the journal on PostgreSQL beside SQLite: medians of {args.rounds} rounds")
    print(f"{'one durable tool call':<52}{'p50 ms':>10}{'p99 ms':>10}{'calls/s':>10}")
    for durability in DURABILITIES:
        for label in ("SQLite", "PostgreSQL"):
            key = f"{label} {durability}"
            print(
                f"{key + ' (' + DURABILITIES[durability][label] + ')':<52}{median(f'{key} p50_ms'):>10.3f}"
                f"{median(f'{key} p99_ms'):>10.3f}{median(f'{key} calls_per_s'):>10.0f}"
            )
    print()
    print(f"{'fleet calls/s (one journal, normal)':<52}{'1 daemon':>10}{'2':>10}{'4':>10}")
    for label in ("SQLite", "PostgreSQL"):
        row = "".join(f"{median(f'fleet {label} {n}'):>10.0f}" for n in (1, 2, 4))
        print(f"{label:<52}{row}")


if __name__ == "__main__":
    asyncio.run(main())
