"""The web view's run list at 100,000 runs: its first page, each filter, a deep page and the
per-tool page, on SQLite and on PostgreSQL, beside the list the view used before (the newest
50, no filter: ``list_runs``), measured in the same run.

Each journal is filled with ``--runs`` runs over 30 days (two tool calls each, among 20
tools; 2% failed, 0.5% left running by a daemon that died) written straight into its tables,
then every query is asked ``--repeat`` times; the figure is the median. The journal's own
reads answer (``find_runs``, ``tool_calls``), and ``http`` rows are ``GET /api/runs`` through
the web view (login, JSON, sidecar tokens) on one kept-alive connection. The target for a
first page is under 300 ms.

Usage: python bench/run_view.py [--runs 100000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx2

from toolbridge._journal.base import Journal, open_journal
from toolbridge._journal.runquery import RunQuery
from toolbridge._ui.server import serve_journal

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.pg_cluster import running_cluster

DAYS = 30
TOOLS = 20


def rows(count: int) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """``count`` runs and their two tool calls each, oldest first."""
    end = round(time.time() * 1000)
    start = end - DAYS * 86_400_000
    step = (end - start) // count
    runs, steps = [], []
    for i in range(count):
        at = start + i * step
        run_id = f"run-{i:06d}"
        failed = i % 50 == 7
        died = i % 200 == 3
        status = "failed" if failed else "running" if died else "completed"
        finished = None if died else at + 40
        lease = at + 30_000 if died else None
        error = "ToolError: out of stock" if failed else None
        runs.append((run_id, status, at, at + 40, finished, 1, error, "d1", lease, 1))
        for n in range(2):
            tool = f"tool-{(i + n * 7) % TOOLS:02d}"
            bad = failed and n == 1
            steps.append(
                (
                    run_id,
                    f"{tool}#{n}",
                    None,
                    n + 1,
                    "tool",
                    tool,
                    f"tbk_{i}_{n}",
                    "failed" if bad else "completed",
                    '{"sku":"a1"}',
                    None if bad else '{"stock":7}',
                    '{"type":"OutOfStock","message":"out of stock"}' if bad else None,
                    1,
                    "[]",
                    at + 5 + n * 15,
                    at + 5 + n * 15 + (i % 13),
                    0,
                )
            )
    return runs, steps


RUN_INSERT = (
    "run_id, status, started_at, updated_at, finished_at, entries, error, owner, lease_expires_at, fence"
)
STEP_INSERT = (
    "run_id, step_key, parent_key, seq, kind, name, idempotency_key, status, input_json, "
    "output_json, error_json, attempts, attempt_log, started_at, finished_at, stale"
)


def fill_sqlite(path: Path, count: int) -> None:
    runs, steps = rows(count)
    with sqlite3.connect(path) as db:
        db.executemany(f"INSERT INTO runs ({RUN_INSERT}) VALUES ({', '.join('?' * 10)})", runs)
        db.executemany(f"INSERT INTO steps ({STEP_INSERT}) VALUES ({', '.join('?' * 16)})", steps)


async def fill_postgres(url: str, count: int) -> None:
    runs, steps = rows(count)
    conn = await asyncpg.connect(url)
    try:
        await conn.copy_records_to_table("runs", records=runs, columns=RUN_INSERT.split(", "))
        await conn.copy_records_to_table("steps", records=steps, columns=STEP_INSERT.split(", "))
        await conn.execute("ANALYZE")  # what autovacuum does soon after a load this size
    finally:
        await conn.close()


async def median_ms(ask: Callable[[], Awaitable[object]], repeat: int) -> float:
    await ask()  # warm: the first read of a table pays for the page cache
    took = []
    for _ in range(repeat):
        started = time.perf_counter()
        await ask()
        took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took)


async def measure(journal: Journal, count: int, repeat: int) -> dict[str, float]:
    middle = time.time() - DAYS * 86_400 / 2
    deep = await journal.find_runs(RunQuery(limit=1, after=None, until=middle))
    cursor = (deep[0].started_at, deep[0].run_id)
    queries: dict[str, Callable[[], Awaitable[object]]] = {
        "before: list_runs(50)": lambda: journal.list_runs(50),
        "first page, no filter": lambda: journal.find_runs(RunQuery()),
        "search id 'run-0421'": lambda: journal.find_runs(RunQuery(search="run-0421")),
        "search id, no match": lambda: journal.find_runs(RunQuery(search="nothing-like-it")),
        "status failed": lambda: journal.find_runs(RunQuery(status="failed")),
        "status interrupted": lambda: journal.find_runs(RunQuery(status="interrupted")),
        "tool tool-07": lambda: journal.find_runs(RunQuery(tool="tool-07")),
        "one day, mid-range": lambda: journal.find_runs(RunQuery(since=middle, until=middle + 86_400)),
        "page at the 50,000th run": lambda: journal.find_runs(RunQuery(after=cursor)),
        "tool page (1,000 calls)": lambda: journal.tool_calls("tool-07", limit=1000),
    }
    figures = {name: await median_ms(ask, repeat) for name, ask in queries.items()}
    async with serve_journal(journal, port=0) as login_url, httpx2.AsyncClient() as http:
        await http.get(login_url)  # the login sets the session cookie
        base = login_url.split("?")[0]
        for name, path in (
            ("http: first page", "api/runs"),
            ("http: status failed", "api/runs?status=failed"),
        ):

            async def get(path: str = path) -> None:
                (await http.get(base + path)).raise_for_status()

            figures[name] = await median_ms(get, repeat)
    return figures


async def on(location: str, count: int, repeat: int) -> dict[str, float]:
    journal = open_journal(location)
    await journal.open()
    try:
        return await measure(journal, count, repeat)
    finally:
        await journal.close()


async def main(count: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="toolbridge-bench-runs-") as tmp:
        path = Path(tmp) / "runs.db"
        journal = open_journal(str(path))
        await journal.open()  # creates and migrates the file
        await journal.close()
        fill_sqlite(path, count)
        sqlite_figures = await on(str(path), count, repeat)
    with running_cluster(durable=True) as cluster:
        url = cluster.create_database()
        journal = open_journal(url)
        await journal.open()
        await journal.close()
        await fill_postgres(url, count)
        postgres_figures = await on(url, count, repeat)
    base_sqlite = sqlite_figures["before: list_runs(50)"]
    base_postgres = postgres_figures["before: list_runs(50)"]
    print(f"the run list on {count:,} runs ({count * 2:,} tool calls): median ms of {repeat}, target < 300")
    print(f"{'query':<30}{'SQLite':>9}{'vs before':>11}{'PostgreSQL':>12}{'vs before':>11}")
    for name, ms in sqlite_figures.items():
        pg = postgres_figures[name]
        print(f"{name:<30}{ms:>9.1f}{ms / base_sqlite:>10.1f}x{pg:>12.1f}{pg / base_postgres:>10.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=9)
    options = parser.parse_args()
    asyncio.run(main(options.runs, options.repeat))
