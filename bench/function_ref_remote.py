"""A function_ref call served by another daemon of the journal, beside the same call served locally.

Two bridges share one journal (a SQLite file, and a PostgreSQL database on a throwaway
cluster): daemon A gives the tool ``function_ref("refund")``; the baseline declares
``refund`` on A itself (the call runs it in place), the measured case only on daemon B (the
call goes through the journal: an invocation row, B's run of its own, the settled row read
back), with B in the same process (woken directly on SQLite, by NOTIFY on PostgreSQL) and in
a process of its own (on SQLite, found by polling: no notifications cross processes there).
Each call is a host call (``bridge.call_tool``) in a fresh run, so what differs is the way to
the function, not a sandbox's start-up. Calls are sequential; the cases alternate in each
round.

Usage: python bench/function_ref_remote.py [--rounds 3] [--calls 100] [--no-postgres]

Each figure is the median over the rounds of each round's median latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolbridge import Bridge, FunctionContext, function_ref

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.pg_cluster import running_cluster, unavailable_reason

DAEMON = Path(__file__).resolve().parent.parent / "tests" / "postgres" / "refund_daemon.py"


def declare(bridge: Bridge) -> None:
    @bridge.function(id="refund")
    async def refund(ctx: FunctionContext) -> dict[str, Any]:
        return {"refunded": ctx.event.data["order_id"]}


async def latencies(a: Bridge, calls: int) -> list[float]:
    measured = []
    for n in range(calls):
        started = time.perf_counter()
        await a.call_tool("refund", {"order_id": f"o{n}", "amount": n}, run_id=uuid.uuid4().hex)
        measured.append((time.perf_counter() - started) * 1000)
    return measured


async def local(journal: str, calls: int) -> float:
    a = Bridge(journal=journal, tools={"refund": function_ref("refund")})
    declare(a)
    async with a:
        return statistics.median(await latencies(a, calls))


async def remote(journal: str, calls: int) -> float:
    b = Bridge(journal=journal)
    declare(b)
    async with b, Bridge(journal=journal, tools={"refund": function_ref("refund")}) as a:
        return statistics.median(await latencies(a, calls))


async def remote_process(journal: str, calls: int) -> float:
    """B as a process of its own (``tests/postgres/refund_daemon.py``)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(DAEMON), journal, "serve", "30s", stdout=asyncio.subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        assert json.loads(await process.stdout.readline())["event"] == "ready"
        async with Bridge(journal=journal, tools={"refund": function_ref("refund")}) as a:
            return statistics.median(await latencies(a, calls))
    finally:
        process.terminate()
        await process.communicate()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    figures: dict[str, list[float]] = {}
    skip_pg = args.no_postgres or unavailable_reason() is not None
    with tempfile.TemporaryDirectory(prefix="toolbridge-bench-") as work:
        cluster_context = None if skip_pg else running_cluster()
        cluster = None if cluster_context is None else cluster_context.__enter__()
        try:
            for _ in range(args.rounds):
                places: dict[str, Callable[[], str]] = {
                    "SQLite": lambda: str(Path(work) / f"{uuid.uuid4().hex}.db")
                }
                if cluster is not None:
                    places["PostgreSQL"] = cluster.create_database
                for label, place in places.items():
                    figures.setdefault(f"{label} local", []).append(await local(place(), args.calls))
                    figures.setdefault(f"{label} remote", []).append(await remote(place(), args.calls))
                    figures.setdefault(f"{label} process", []).append(
                        await remote_process(place(), args.calls)
                    )
        finally:
            if cluster_context is not None:
                cluster_context.__exit__(None, None, None)
    print(
        f"function_ref('refund') from the host, {args.calls} calls in a row; medians of {args.rounds} rounds"
    )
    print(f"{'where refund is declared':<44}{'p50 ms':>10}{'x local':>10}")
    for label in ("SQLite", "PostgreSQL"):
        if f"{label} local" not in figures:
            print(f"{label}: skipped ({'--no-postgres' if args.no_postgres else unavailable_reason()})")
            continue
        base = statistics.median(figures[f"{label} local"])
        far = statistics.median(figures[f"{label} remote"])
        print(f"{label + ', on the calling daemon':<44}{base:>10.2f}{1.0:>10.2f}")
        print(f"{label + ', on another daemon, same process':<44}{far:>10.2f}{far / base:>10.2f}")
        other = statistics.median(figures[f"{label} process"])
        print(f"{label + ', on a daemon in another process':<44}{other:>10.2f}{other / base:>10.2f}")


if __name__ == "__main__":
    asyncio.run(main())
