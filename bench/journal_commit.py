"""What a fenced, explicit-transaction commit costs, beside the single-statement commit it replaced.

The journal commits each batch as ``BEGIN IMMEDIATE``, a fence check of the batch's runs, the
multi-row upsert and ``COMMIT``: four hops to aiosqlite's thread. Before, a batch was one
autocommit multi-row upsert (one hop) with no fence: the baseline is the same group commit
running that statement, on the same file, in the same run. N lone writes one after another
(each awaited), then 32 writers at once.

Usage: python bench/journal_commit.py [--rounds 5] [--writes 2000]

Each figure is the median over the rounds (microseconds per write, writes per second).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import aiosqlite

from toolbridge._journal.commit import GroupCommit, Pending, awaiting
from toolbridge._journal.rows import STEP_COLUMNS, step_row
from toolbridge._journal.sqlite import SQLiteJournal
from toolbridge._journal.statements import STEP
from toolbridge._records import StepRecord

CALLERS = 32
_ROW = f"({', '.join('?' * 16)})"
_CONFLICT = (
    "ON CONFLICT (run_id, step_key) DO UPDATE SET status = excluded.status, "
    "output_json = excluded.output_json, finished_at = excluded.finished_at"
)


def record(index: int) -> StepRecord:
    key = f"k{index}"
    rec = StepRecord(
        run_id="bench", key=key, parent_key=None, seq=index, kind="tool", name="t", idempotency_key=key
    )
    rec.complete('{"ok":true}')
    return rec


async def measure(write: Callable[[StepRecord], Awaitable[None]], writes: int) -> dict[str, float]:
    started = time.perf_counter()
    for index in range(writes):
        await write(record(index))
    sequential = (time.perf_counter() - started) / writes * 1e6
    started = time.perf_counter()

    async def caller(offset: int) -> None:
        for index in range(writes // CALLERS):
            await write(record(writes + offset * writes + index))

    await asyncio.gather(*(caller(offset) for offset in range(CALLERS)))
    concurrent = (writes // CALLERS) * CALLERS / (time.perf_counter() - started)
    return {"lone_us": sequential, "concurrent_per_s": concurrent}


async def one_round(work: Path, writes: int) -> dict[str, dict[str, float]]:
    journal = SQLiteJournal(work / "journal.db")
    await journal.open()
    try:
        await journal.enter_run("bench", lease=60)
        current = await measure(journal.write, writes)
    finally:
        await journal.close()
    # The baseline: one autocommit statement per write on a file with the same schema.
    async with aiosqlite.connect(work / "journal.db", isolation_level=None) as db:
        await db.execute("PRAGMA synchronous=NORMAL")
        await db.execute("PRAGMA busy_timeout=5000")
        await db.execute("DELETE FROM steps")

        async def one_statement(batch: Sequence[Pending]) -> None:
            rows = ", ".join([_ROW] * len(batch))
            params = tuple(value for pending in batch for value in pending.params)
            await db.execute(f"INSERT INTO steps ({STEP_COLUMNS}) VALUES {rows} {_CONFLICT}", params)

        commits = GroupCommit(awaiting(one_statement))

        async def grouped(rec: StepRecord) -> None:
            await commits.add(STEP, (rec.run_id, rec.key), step_row(rec))

        baseline = await measure(grouped, writes)
        await commits.drain()
    return {"before: one autocommit statement": baseline, "now: fenced BEGIN IMMEDIATE..COMMIT": current}


async def main(rounds: int, writes: int) -> None:
    results = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as work:
            results.append(await one_round(Path(work), writes))
    print(f"{'':40} {'lone write (µs)':>16} {'32 writers (writes/s)':>22}")
    for name in results[0]:
        lone = statistics.median(r[name]["lone_us"] for r in results)
        concurrent = statistics.median(r[name]["concurrent_per_s"] for r in results)
        print(f"{name:40} {lone:16.0f} {concurrent:22.0f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--writes", type=int, default=2000)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.writes))
