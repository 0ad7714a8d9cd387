"""Which PostgreSQL driver for the journal: asyncpg or psycopg 3 (async, with psycopg_pool).

Against a throwaway cluster with fsync and synchronous commit on (as in production), each
driver, through its own pool, does what the journal does most:

1. one durable commit: a one-row step upsert in its own transaction;
2. a 32-row batch: 32 step upserts in one transaction, as one statement over arrays
   (``INSERT ... SELECT FROM unnest(...) ON CONFLICT DO UPDATE``, prepared once whatever the
   row count);
3. a fenced batch: the same, after a ``SELECT ... FOR SHARE`` of the run row (the fence).

Usage: python bench/pg_driver.py [--rounds 5] [--ops 400]

Each figure is the median latency (ms) over ``ops`` operations, then the median of the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import psycopg
import psycopg_pool

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.pg_cluster import running_cluster

SCHEMA = """
CREATE TABLE runs (run_id TEXT PRIMARY KEY, fence BIGINT NOT NULL);
CREATE TABLE steps (
    run_id TEXT NOT NULL, step_key TEXT NOT NULL, status TEXT NOT NULL, output_json TEXT,
    finished_at BIGINT, PRIMARY KEY (run_id, step_key)
);
INSERT INTO runs VALUES ('r', 1);
"""
UPSERT = """
INSERT INTO steps (run_id, step_key, status, output_json, finished_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[])
ON CONFLICT (run_id, step_key) DO UPDATE SET
    status = excluded.status, output_json = excluded.output_json, finished_at = excluded.finished_at
"""
FENCE = "SELECT fence FROM runs WHERE run_id = $1 FOR SHARE"


def _columns(rows: int, counter: list[int]) -> list[list[Any]]:
    counter[0] += 1
    keys = [f"k{counter[0] % 64}-{index}" for index in range(rows)]
    return [["r"] * rows, keys, ["completed"] * rows, ['{"ok":true}'] * rows, [counter[0]] * rows]


async def _timed(op: Callable[[], Awaitable[None]], ops: int) -> float:
    samples = []
    for _ in range(ops):
        started = time.perf_counter()
        await op()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def bench_asyncpg(url: str, ops: int) -> dict[str, float]:
    pool = await asyncpg.create_pool(url, min_size=2, max_size=2)
    counter = [0]
    try:

        async def batch(rows: int, fenced: bool) -> None:
            async with pool.acquire() as conn, conn.transaction():
                if fenced:
                    await conn.fetchval(FENCE, "r")
                await conn.execute(UPSERT, *_columns(rows, counter))

        return {
            "commit (1 row)": await _timed(lambda: batch(1, False), ops),
            "batch (32 rows)": await _timed(lambda: batch(32, False), ops),
            "fenced batch (32 rows)": await _timed(lambda: batch(32, True), ops),
        }
    finally:
        await pool.close()


def _psycopg_sql(sql: str) -> str:
    for index in range(5, 0, -1):
        sql = sql.replace(f"${index}", "%s")
    return sql


async def bench_psycopg(url: str, ops: int) -> dict[str, float]:
    pool = psycopg_pool.AsyncConnectionPool(url, min_size=2, max_size=2, open=False)
    await pool.open()
    upsert, fence = _psycopg_sql(UPSERT), _psycopg_sql(FENCE)
    counter = [0]
    try:

        async def batch(rows: int, fenced: bool) -> None:
            async with pool.connection() as conn, conn.transaction():
                if fenced:
                    await conn.execute(fence, ("r",), prepare=True)
                await conn.execute(upsert, _columns(rows, counter), prepare=True)

        return {
            "commit (1 row)": await _timed(lambda: batch(1, False), ops),
            "batch (32 rows)": await _timed(lambda: batch(32, False), ops),
            "fenced batch (32 rows)": await _timed(lambda: batch(32, True), ops),
        }
    finally:
        await pool.close()


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ops", type=int, default=400)
    args = parser.parse_args()
    with running_cluster(durable=True) as cluster:
        results: dict[str, list[dict[str, float]]] = {"asyncpg": [], "psycopg": []}
        for _ in range(args.rounds):
            for name, bench in (("asyncpg", bench_asyncpg), ("psycopg", bench_psycopg)):
                url = cluster.create_database()
                async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                    await conn.execute(SCHEMA.encode())
                results[name].append(await bench(url, args.ops))
    print(f"median ms per operation, {args.rounds} rounds x {args.ops} ops, fsync on")
    print(f"{'':26}{'asyncpg':>10}{'psycopg':>10}")
    for figure in results["asyncpg"][0]:
        row = [statistics.median(r[figure] for r in results[name]) for name in ("asyncpg", "psycopg")]
        print(f"{figure:26}{row[0]:>10.3f}{row[1]:>10.3f}")


if __name__ == "__main__":
    asyncio.run(main())
