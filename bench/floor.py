"""The least a durable call can cost on this machine: no daemon, only what every call must do.

A bare grpc.aio ``CallToolStream`` handler, served from the same event loop as a bare unary
echo, answers the real ``inngest_tools`` client (the runtime's interpreter, one call after
another) after doing what a durable call cannot skip: parse the call and its JSON arguments,
hash the step key, run an ``echo`` tool (``floor-async`` inline; ``floor-sync`` in a worker
thread, through the daemon's own pool), serialize the result, commit one fenced step row to
SQLite (the journal's own statement, WAL, ``synchronous=NORMAL``) and answer. No
authentication, limits, fair shares, single flight, retries, timeouts, tracing or run
bookkeeping. Set beside ``bench/hot_path.py``, it shows how much of a durable call's cost is
the machine's (the transport and the commit) and how much is the daemon's.

Usage: python bench/floor.py [--rounds 9] [--sequential 1000]

Figures are medians over rounds of each round's p50; ratios are medians of each round's
ratio to ``raw-unary``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sqlite3
import statistics
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
from call_latency import CLIENTS, _run_raw, _start_raw_echo
from grpc import aio

from toolbridge._journal import rows
from toolbridge._journal.sqlite import SQLiteJournal
from toolbridge._journal.sqlite.statements import UPSERT_STEP
from toolbridge._json import canonical, digest, dumps, loads_strict
from toolbridge._records import StepRecord
from toolbridge._sandbox.runtime.python import build_runtime
from toolbridge._server._proto import toolbridge_pb2 as pb
from toolbridge._tools.threads import run_in_thread

SUBJECTS = ("raw-unary", "floor-async", "floor-sync")
RUN_ID = "floor"
SEQUENTIAL_CLIENT = """
import asyncio, json, sys, time
from inngest_tools import tools
async def main(n):
    for _ in range(50):
        await tools.echo("warm")
    latencies = []
    for _ in range(n):
        started = time.perf_counter()
        await tools.echo("x")
        latencies.append((time.perf_counter() - started) * 1000)
    print(json.dumps({"sequential_ms": latencies}))
asyncio.run(main(int(sys.argv[1])))
"""


def _echo_sync(value: Any) -> Any:
    return value


async def _echo_async(value: Any) -> Any:
    return value


class Floor:
    """The stream handler: each call parsed, run, committed and answered, one at a time."""

    def __init__(self, path: Path, fence: int) -> None:
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._fence = fence
        self._seq = itertools.count(1)

    async def stream(self, requests: AsyncIterator[bytes], context: aio.ServicerContext[Any, Any]) -> None:
        in_thread = dict(context.invocation_metadata() or ()).get("x-toolbridge-token") == "floor-sync"
        async for data in requests:
            request = pb.CallToolStreamRequest.FromString(data)
            call = request.call
            positional = loads_strict(call.positional_arguments_json or b"[]")
            input_json = canonical(positional)
            seq = next(self._seq)
            key = f"floor/{call.tool_name}@{digest(input_json, 12)}#{seq}"
            rec = StepRecord(
                run_id=RUN_ID,
                key=key,
                parent_key="floor",
                seq=seq,
                kind="tool",
                name=call.tool_name,
                idempotency_key=digest(key, 32),
                input_json=input_json,
            )
            value = await (run_in_thread(_echo_sync, *positional) if in_thread else _echo_async(*positional))
            rec.complete(dumps(value))
            self._db.execute(UPSERT_STEP, (*rows.step_row(rec), RUN_ID, self._fence))
            reply = pb.CallToolStreamResponse(call_id=request.call_id)
            reply.response.step_key = key
            reply.response.result_json = (rec.output_json or "null").encode()
            await context.write(reply)


async def _serve(work: Path) -> tuple[aio.Server, aio.Server]:
    journal = SQLiteJournal(work / "floor.db")  # the journal's own schema and indexes
    await journal.open()
    await journal.enter_run(RUN_ID, lease=3600)
    fence = (await journal.get_run(RUN_ID)).fence  # type: ignore[union-attr]
    await journal.close()
    floor = Floor(work / "floor.db", fence)
    server = aio.server()
    handler = grpc.stream_stream_rpc_method_handler(
        floor.stream, response_serializer=pb.CallToolStreamResponse.SerializeToString
    )
    methods = {"CallToolStream": handler}
    service = grpc.method_handlers_generic_handler("toolbridge.v1.ToolBridgeService", methods)
    server.add_generic_rpc_handlers((service,))
    server.add_insecure_port(f"unix:{work / 'floor.sock'}")
    await server.start()
    return server, await _start_raw_echo(work / "raw.sock")


async def _client(argv: list[str], env: dict[str, str]) -> float:
    process = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, env=env)
    stdout, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"{argv} failed")
    return float(statistics.median(json.loads(stdout)["sequential_ms"]))


async def _round(work: Path, python: str, sequential: int, order: list[str]) -> dict[str, float]:
    script = work / "client.py"
    script.write_text(SEQUENTIAL_CLIENT)
    figures = {}
    for subject in order:
        if subject == "raw-unary":
            client = [python, str(CLIENTS / "raw_echo_client.py")]
            report = await _run_raw(client, f"unix:{work / 'raw.sock'}", "unary", [str(sequential), "1", "1"])
            figures[subject] = statistics.median(report["sequential_ms"])
        else:
            address = f"unix:{work / 'floor.sock'}"
            env = {**os.environ, "TOOLBRIDGE_ADDRESS": address, "TOOLBRIDGE_TOKEN": subject}
            figures[subject] = await _client([python, str(script), str(sequential)], env)
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--sequential", type=int, default=1000)
    args = parser.parse_args()
    python = str(build_runtime().bin_dir / "python3")  # the interpreter sandboxes run
    rounds = []
    with tempfile.TemporaryDirectory(prefix="toolbridge-floor-") as scratch:
        work = Path(scratch)
        servers = await _serve(work)
        try:
            for number in range(args.rounds):
                turn = number % len(SUBJECTS)
                order = [*SUBJECTS[turn:], *SUBJECTS[:turn]]
                rounds.append(await _round(work, python, args.sequential, order))
        finally:
            for server in servers:
                await server.stop(None)
    print(f"floor: {args.sequential} sequential calls, medians of {args.rounds} interleaved rounds")
    print("| subject | p50 ms | p50 x unary |")
    print("| --- | ---: | ---: |")
    for subject in SUBJECTS:
        p50 = statistics.median(r[subject] for r in rounds)
        ratio = statistics.median(r[subject] / r["raw-unary"] for r in rounds)
        print(f"| {subject} | {p50:.3f} | {ratio:.2f} |")


if __name__ == "__main__":
    asyncio.run(main())
