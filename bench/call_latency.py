"""Latency of a tool call from sandboxed code, beside a bare gRPC echo measured in the same run.

Each client runs as a real sandboxed command (``step.sandbox.commands.run``) calling a trivial
``echo`` tool through the daemon: every call is validated, journaled in SQLite and answered.
The baseline is a bare grpc.aio echo service on the same kind of Unix socket, served from the
same event loop, called by a subprocess with the same patterns (one RPC per call, and one
multiplexed bidirectional stream as inngest_tools uses), from Python (``raw-*``) and from Node
(``raw-node-*``, with @grpc/grpc-js: a stock Node gRPC client, where inngest_tools speaks
HTTP/2 itself), apart from the daemon.

Usage: python bench/call_latency.py [--rounds 3] [--sequential 2000] [--per-caller 100] [--callers 32]

Each figure is the median over the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
from grpc import aio

from toolbridge import Bridge, ToolOptions

HERE = Path(__file__).resolve().parent
UNPACED = ToolOptions(max_calls=10_000_000, max_call_rate=1e9)
"""The options of a measured command: no call budget, and no pacing. ``max_call_rate``
(2,000 calls a second by default) is a policy against floods, measured by its own row in
``concurrency.py``; left at its default here it would cap what is measured at about the
baseline's own rate."""
CLIENTS = HERE / "clients"

# Tool clients: (name, argv prefix). A client whose program is missing is skipped with a note.
TOOL_CLIENTS: list[tuple[str, list[str]]] = [
    ("python", ["python3", str(CLIENTS / "python_client.py")]),
    ("node", ["node", str(CLIENTS / "node_client.js")]),
]


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _figures(report: dict[str, Any]) -> dict[str, float]:
    latencies = report["sequential_ms"]
    concurrent = report["concurrent"]
    return {
        "p50_ms": statistics.median(latencies),
        "p99_ms": _percentile(latencies, 0.99),
        "calls_per_s": concurrent["calls"] / concurrent["seconds"],
    }


async def _echo_unary(request: bytes, context: aio.ServicerContext) -> bytes:
    return request


async def _echo_stream(requests: AsyncIterator[bytes], context: aio.ServicerContext) -> AsyncIterator[bytes]:
    async for request in requests:
        yield request


async def _start_raw_echo(socket: Path) -> aio.Server:
    server = aio.server()
    handler = grpc.method_handlers_generic_handler(
        "bench.Echo",
        {
            "Unary": grpc.unary_unary_rpc_method_handler(_echo_unary),
            "Stream": grpc.stream_stream_rpc_method_handler(_echo_stream),
        },
    )
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"unix:{socket}")
    await server.start()
    return server


async def _run_raw(client: list[str], address: str, mode: str, sizes: list[str]) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        *client,
        address,
        mode,
        *sizes,
        stdout=asyncio.subprocess.PIPE,
    )
    stdout, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"raw echo client ({mode}) failed")
    return dict(json.loads(stdout))


async def _round(args: argparse.Namespace, work: Path) -> dict[str, dict[str, float]]:
    sizes = [str(args.sequential), str(args.per_caller), str(args.callers)]
    results: dict[str, dict[str, float]] = {}
    options = UNPACED
    async with Bridge(journal=work / "bench.db") as bridge:
        runtime_python = str(bridge._life.services.runtime.bin_dir / "python3")  # type: ignore[union-attr]
        raw = await _start_raw_echo(work / "raw.sock")
        try:
            # The same patterns from Python (grpcio) and from Node (@grpc/grpc-js).
            raw_clients = [
                [runtime_python, str(CLIENTS / "raw_echo_client.py")],
                ["node", str(CLIENTS / "raw_echo_client.js")],
            ]
            for client in raw_clients:
                for mode in ("unary", "stream"):
                    report = await _run_raw(client, f"unix:{work / 'raw.sock'}", mode, sizes)
                    results[report["client"]] = _figures(report)
        finally:
            await raw.stop(None)
        for name, argv in TOOL_CLIENTS:
            async with bridge.run(f"bench-{name}") as step:
                result = await step.sandbox.commands.run(
                    name,
                    [*argv, *sizes],
                    tools={"echo": lambda value: value},
                    tool_options=options,
                    timeout=600,
                )
            if result.exit_code != 0:
                print(f"{name} client failed:\n{result.stderr}", file=sys.stderr)
                continue
            results[name] = _figures(json.loads(result.stdout))
    return results


def _print(rounds: list[dict[str, dict[str, float]]], args: argparse.Namespace) -> None:
    names = list(rounds[0])
    median = {
        name: {key: statistics.median(r[name][key] for r in rounds if name in r) for key in rounds[0][name]}
        for name in names
    }
    baseline = median["raw-stream"]
    print(
        f"tool call latency: {args.sequential} sequential calls, {args.callers} callers x "
        f"{args.per_caller} calls; medians of {len(rounds)} rounds"
    )
    print(f"{'client':<16}{'p50 ms':>9}{'p99 ms':>9}{'calls/s':>10}{'p50 x':>8}{'p99 x':>8}{'calls/s x':>11}")
    for name in names:
        figures = median[name]
        print(
            f"{name:<16}{figures['p50_ms']:>9.3f}{figures['p99_ms']:>9.3f}{figures['calls_per_s']:>10.0f}"
            f"{figures['p50_ms'] / baseline['p50_ms']:>8.2f}{figures['p99_ms'] / baseline['p99_ms']:>8.2f}"
            f"{figures['calls_per_s'] / baseline['calls_per_s']:>11.2f}"
        )
    print("x = ratio to raw-stream (a bare grpc.aio echo over one multiplexed stream, same socket kind)")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sequential", type=int, default=2000)
    parser.add_argument("--per-caller", type=int, default=100)
    parser.add_argument("--callers", type=int, default=32)
    args = parser.parse_args()
    rounds = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="toolbridge-bench-") as work:
            rounds.append(await _round(args, Path(work)))
    _print(rounds, args)


if __name__ == "__main__":
    asyncio.run(main())
