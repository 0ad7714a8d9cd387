"""Benchmark client for replay: N sequential tool calls, timed, then optionally block.

Usage: python3 replay_client.py CALLS BLOCK
Prints one JSON line: {"seconds": S, "calls": N}; with BLOCK=1 it then calls `block`, which the
host never answers on a first entry, so that the entry can be interrupted.
"""

import asyncio
import json
import sys
import time

from inngest_tools import tools


async def main(calls: int, block: bool) -> None:
    started = time.perf_counter()
    for index in range(calls):
        await tools.echo(index)
    print(json.dumps({"seconds": time.perf_counter() - started, "calls": calls}), flush=True)
    if block:
        await tools.block()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2] == "1"))
