"""Benchmark client for replay: N sequential tool calls, timed, then optionally block.

Usage: REPLAY_BLOCK=0|1 python3 replay_client.py CALLS
Prints one JSON line: {"seconds": S, "calls": N}; with REPLAY_BLOCK=1 it then calls `block`,
which the host never answers on a first entry, so that the entry can be interrupted. (An
environment variable, not an argument: the re-run must have the command line the first run
had, or it is a changed step.)
"""

import asyncio
import json
import os
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
    asyncio.run(main(int(sys.argv[1]), os.environ.get("REPLAY_BLOCK") == "1"))
