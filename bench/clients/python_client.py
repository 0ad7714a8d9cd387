"""Benchmark client: runs inside a sandboxed command and calls the `echo` tool.

Usage: python3 python_client.py SEQUENTIAL PER_CALLER CALLERS [barrier]
With ``barrier``, the callers start once the host's ``barrier`` tool returns (after the warm-up
and the sequential calls): commands measured together then call together.
Prints one JSON line: {"client", "sequential_ms": [...], "concurrent": {"callers", "calls", "seconds"}}.
"""

import asyncio
import json
import sys
import time

from inngest_tools import tools

WARMUP = 50


async def main(sequential: int, per_caller: int, callers: int, barrier: bool) -> None:
    for _ in range(WARMUP):
        await tools.echo("warm")
    latencies: list[float] = []
    for _ in range(sequential):
        started = time.perf_counter()
        await tools.echo("x")
        latencies.append((time.perf_counter() - started) * 1000)

    async def caller() -> None:
        for _ in range(per_caller):
            await tools.echo("x")

    if barrier:
        await tools.barrier()
    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    seconds = time.perf_counter() - started
    report = {
        "client": "python",
        "sequential_ms": latencies,
        "concurrent": {"callers": callers, "calls": callers * per_caller, "seconds": seconds},
    }
    print(json.dumps(report))


if __name__ == "__main__":
    sequential, per_caller, callers = (int(arg) for arg in sys.argv[1:4])
    asyncio.run(main(sequential, per_caller, callers, sys.argv[4:5] == ["barrier"]))
