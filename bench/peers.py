"""Peers of a durable call, measured in the same run: an MCP SDK stdio tool call, a DBOS step.

Each peer runs in a virtual environment of its own, made by this benchmark on first use
(under ``~/.cache/toolbridge/bench-peers``, pinned versions), so nothing of theirs reaches
toolbridge's environment. Rounds interleave every subject; each figure is the median of the
rounds' p50 latencies (sequential calls, one caller), and ratios are to a bare grpc.aio unary
echo measured in the same round:

- ``raw-unary``: a bare grpc.aio unary echo on a Unix socket (the baseline);
- ``toolbridge``: a durable call from a sandboxed Python client (sync tool, SQLite journal,
  committed before the answer);
- ``mcp-stdio``: the MCP SDK's client calling an ``echo`` tool of an MCP SDK stdio server
  (not durable);
- ``dbos-default`` / ``dbos-wal-normal``: a DBOS step inside a workflow, SQLite system
  database with DBOS's settings / in WAL mode with synchronous=NORMAL (toolbridge's default
  durability);
- ``toolbridge-pg``: the same durable call as ``toolbridge``, journaled in PostgreSQL (a
  throwaway cluster on this machine, fsync on, through its Unix socket; ``durability="normal"``,
  i.e. ``synchronous_commit=off``);
- ``dbos-pg-default`` / ``dbos-pg-async-commit``: a DBOS step with its system database on the
  same PostgreSQL server, with DBOS's settings (``synchronous_commit=on``, a WAL flush per
  step) / with ``synchronous_commit=off``, its fastest durable setting and toolbridge's.

Usage: python bench/peers.py [--rounds 5] [--calls 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import venv
from pathlib import Path
from typing import Any

from call_latency import CLIENTS, _start_raw_echo

from toolbridge import Bridge, ToolOptions

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.pg_cluster import Cluster, running_cluster

HERE = Path(__file__).resolve().parent
PEERS = HERE / "peers"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "toolbridge" / "bench-peers"
REQUIREMENTS = {"mcp": ["mcp==2.3.0"], "dbos": ["dbos==3.4.0"]}


def peer_python(name: str) -> Path:
    """The interpreter of a peer's own venv, made (and its packages installed) on first use."""
    home = CACHE / name
    python = home / "bin" / "python"
    marker = home / ".installed"
    if not marker.exists() or marker.read_text() != " ".join(REQUIREMENTS[name]):
        print(f"peers: making the {name} venv in {home} (once)", file=sys.stderr, flush=True)
        venv.EnvBuilder(clear=True, with_pip=True).create(home)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *REQUIREMENTS[name]],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        marker.write_text(" ".join(REQUIREMENTS[name]))
    return python


async def _json_of(*argv: str) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    stdout, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"{argv[1]} failed with exit code {process.returncode}")
    return dict(json.loads(stdout))


async def _toolbridge_pg(calls: int, url: str) -> float:
    async with Bridge(journal=url) as bridge, bridge.run("peers") as step:
        result = await step.sandbox.commands.run(
            "toolbridge-pg",
            ["python3", str(CLIENTS / "python_client.py"), str(calls), "1", "1"],
            tools={"echo": lambda value: value},
            tool_options=ToolOptions(max_calls=10_000_000),
            timeout=600,
        )
    if result.exit_code != 0:
        raise RuntimeError(f"the toolbridge client (PostgreSQL) failed:\n{result.stderr}")
    return float(statistics.median(json.loads(result.stdout)["sequential_ms"]))


async def _round(calls: int, work: Path, pythons: dict[str, Path], cluster: Cluster) -> dict[str, float]:
    p50: dict[str, float] = {}
    async with Bridge(journal=work / "bench.db") as bridge:
        raw = await _start_raw_echo(work / "raw.sock")
        # Both clients run as sandboxed commands, so they use the same runtime interpreter.
        async with bridge.run("peers") as step:
            try:
                result = await step.sandbox.commands.run(
                    "raw-unary",
                    [
                        "python3",
                        str(CLIENTS / "raw_echo_client.py"),
                        f"unix:{work / 'raw.sock'}",
                        "unary",
                        str(calls),
                        "1",
                        "1",
                    ],
                    timeout=600,
                )
            finally:
                await raw.stop(None)
            if result.exit_code != 0:
                raise RuntimeError(f"the raw echo client failed:\n{result.stderr}")
            p50["raw-unary"] = statistics.median(json.loads(result.stdout)["sequential_ms"])
            result = await step.sandbox.commands.run(
                "toolbridge",
                ["python3", str(CLIENTS / "python_client.py"), str(calls), "1", "1"],
                tools={"echo": lambda value: value},
                tool_options=ToolOptions(max_calls=10_000_000),
                timeout=600,
            )
        if result.exit_code != 0:
            raise RuntimeError(f"the toolbridge client failed:\n{result.stderr}")
        p50["toolbridge"] = statistics.median(json.loads(result.stdout)["sequential_ms"])
    report = await _json_of(
        str(pythons["mcp"]), str(PEERS / "mcp_client.py"), str(PEERS / "mcp_server.py"), str(calls)
    )
    p50["mcp-stdio"] = statistics.median(report["latencies_ms"])
    for mode in ("default", "wal-normal"):
        database = work / f"dbos-{mode}.sqlite"
        report = await _json_of(
            str(pythons["dbos"]), str(PEERS / "dbos_steps.py"), mode, str(database), str(calls)
        )
        p50[f"dbos-{mode}"] = statistics.median(report["latencies_ms"])
    p50["toolbridge-pg"] = await _toolbridge_pg(calls, cluster.create_database())
    for mode in ("pg-default", "pg-async-commit"):
        report = await _json_of(
            str(pythons["dbos"]), str(PEERS / "dbos_steps.py"), mode, cluster.create_database(), str(calls)
        )
        p50[f"dbos-{mode}"] = statistics.median(report["latencies_ms"])
    return p50


def summarize(rounds: list[dict[str, float]]) -> list[tuple[str, float, float]]:
    """(subject, median p50 ms, median of the rounds' ratios to raw-unary)."""
    rows = []
    for name in rounds[0]:
        p50 = statistics.median(r[name] for r in rounds)
        ratio = statistics.median(r[name] / r["raw-unary"] for r in rounds)
        rows.append((name, p50, ratio))
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    pythons = {name: peer_python(name) for name in REQUIREMENTS}
    rounds = []
    load = os.getloadavg()[0]
    with running_cluster(durable=True) as cluster:
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix="toolbridge-peers-") as work:
                rounds.append(await _round(args.calls, Path(work), pythons, cluster))
    print(f"load average before / after: {load:.1f} / {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"peers: {args.calls} sequential calls each; medians of {args.rounds} interleaved rounds")
    print(f"{'subject':<22}{'p50 ms':>9}{'x unary':>9}")
    for name, p50, ratio in summarize(rounds):
        print(f"{name:<22}{p50:>9.3f}{ratio:>9.2f}")
    print("x unary = ratio to raw-unary (a bare grpc.aio unary echo) in the same round")
    pg = statistics.median(r["toolbridge-pg"] / r["toolbridge"] for r in rounds)
    print(f"toolbridge-pg / toolbridge (PostgreSQL / SQLite journal, same round): {pg:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
