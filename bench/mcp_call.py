"""The per-call cost of an MCP call beside a gRPC call, measured in the same run.

Every row calls the same trivial ``echo`` tool through the whole pipeline (validation, the
journal, the answer), one call after another:

- ``grpc``: from a sandboxed command (``inngest_tools``, one multiplexed stream), as the
  baseline: each call is a step of the command's run;
- ``host call_tool``: ``Bridge.call_tool`` in this process, no transport: each call is a run
  of its own (entering it and ending it are journaled too), as an MCP call without a run id;
- ``mcp-stdio``, ``mcp-http``: the official SDK's client against ``toolbridge mcp`` in a
  subprocess, over stdio and over Streamable HTTP (stateless, JSON responses);
- ``stdio JSON-RPC (no client)``: ``tools/call`` lines written to the same server's stdin by
  hand, no SDK client: what the server side of an MCP call costs;
- ``http ping (SDK floor)``: a JSON-RPC ``ping`` POSTed to the same server on one kept-alive
  connection, no MCP client and no tool: what the SDK's stateless HTTP transport costs alone;
- ``sdk MCPServer http``: the official SDK's own ``MCPServer`` serving the same ``echo`` over
  the same transport (Streamable HTTP, stateless, JSON responses, uvicorn) in a subprocess,
  called by the same client: the baseline ``mcp-http`` is held to (at most 1.5x). It journals
  nothing; ``mcp-http`` records every call as a durable step.

Usage: python bench/mcp_call.py [--rounds 3] [--calls 500]

Each figure is the median over the rounds of each round's median.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from toolbridge import Bridge, ToolOptions

HERE = Path(__file__).resolve().parent
TOOLBRIDGE = str(Path(sys.executable).with_name("toolbridge"))
WARMUP = 50

APP = """
from toolbridge import Bridge

async def echo(value: str) -> str:
    return value

def bridge() -> Bridge:
    return Bridge(journal={journal!r}, tools={{"echo": echo}})
"""

SDK_SERVER = """
import asyncio

import uvicorn
from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk")


@server.tool()
async def echo(value: str) -> str:
    return value


async def main() -> None:
    app = server.streamable_http_app(json_response=True, stateless_http=True)
    web = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    serving = asyncio.ensure_future(web.serve())
    while not web.started:
        await asyncio.sleep(0.01)
    port = web.servers[0].sockets[0].getsockname()[1]
    print(f"SDK_MCP_URL=http://127.0.0.1:{port}/mcp", flush=True)
    await serving


asyncio.run(main())
"""


async def echo(value: str) -> str:
    return value


async def timed(call: Callable[[], Awaitable[object]], calls: int) -> float:
    """The median milliseconds of ``calls`` sequential calls, after a warm-up."""
    for _ in range(WARMUP):
        await call()
    latencies = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        latencies.append((time.perf_counter() - started) * 1000)
    return statistics.median(latencies)


async def grpc_round(workdir: Path, calls: int) -> float:
    async with Bridge(journal=workdir / "grpc.db", tools={"echo": echo}) as bridge, bridge.run() as step:
        result = await step.sandbox.commands.run(
            "client",
            ["python3", str(HERE / "clients" / "python_client.py"), str(calls), "0", "0"],
            tools={"echo": echo},
            tool_options=ToolOptions(max_calls=calls + WARMUP),
            timeout=600,
        )
    if result.exit_code != 0:
        raise SystemExit(f"the gRPC client failed:\n{result.stderr}")
    latencies: list[float] = json.loads(result.stdout)["sequential_ms"]
    return statistics.median(latencies)


async def host_round(workdir: Path, calls: int) -> float:
    async with Bridge(journal=workdir / "host.db", tools={"echo": echo}) as bridge:
        return await timed(lambda: bridge.call_tool("echo", {"value": "x"}), calls)


async def mcp_round(client: Client, calls: int) -> float:
    await client.list_tools()  # as a client does first; it also knows the output schema then

    async def call() -> None:
        result = await client.call_tool("echo", {"value": "x"})
        assert not result.is_error, result

    return await timed(call, calls)


async def mcp_stdio_round(workdir: Path, calls: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(workdir)}
    params = StdioServerParameters(command=TOOLBRIDGE, args=["mcp", "bench_app:bridge"], cwd=workdir, env=env)
    async with Client(params) as client:
        return await mcp_round(client, calls)


async def raw_stdio_round(workdir: Path, calls: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(workdir)}
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE,
        "mcp",
        "bench_app:bridge",
        cwd=workdir,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    ids = iter(range(1, 1 << 30))

    async def rpc(method: str, params: Mapping[str, object]) -> None:
        message = {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}
        process.stdin.write(json.dumps(message).encode() + b"\n")  # type: ignore[union-attr]
        await process.stdin.drain()  # type: ignore[union-attr]
        answer = json.loads(await process.stdout.readline())  # type: ignore[union-attr]
        assert "result" in answer, answer

    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    }
    await rpc("initialize", hello)
    process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    try:
        return await timed(lambda: rpc("tools/call", {"name": "echo", "arguments": {"value": "x"}}), calls)
    finally:
        process.stdin.close()
        await process.wait()


def bearer(token: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"} if token else {})


async def sdk_http_round(workdir: Path, calls: int) -> float:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SDK_SERVER,
        cwd=workdir,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    try:
        url = (await process.stdout.readline()).decode().strip().removeprefix("SDK_MCP_URL=")
        async with bearer("") as http, Client(streamable_http_client(url, http_client=http)) as client:
            return await mcp_round(client, calls)
    finally:
        process.terminate()
        await process.wait()


async def mcp_http_round(workdir: Path, calls: int) -> tuple[float, float]:
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE,
        "mcp",
        "bench_app:bridge",
        "--http",
        "127.0.0.1:0",
        cwd=workdir,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    try:
        url = (await process.stdout.readline()).decode().strip().removeprefix("TOOLBRIDGE_MCP_URL=")
        token = (await process.stdout.readline()).decode().strip().removeprefix("TOOLBRIDGE_MCP_TOKEN=")
        async with bearer(token) as http, Client(streamable_http_client(url, http_client=http)) as client:
            call_ms = await mcp_round(client, calls)
        headers = {
            "authorization": f"Bearer {token}",
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": "2025-06-18",
        }
        ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}})
        async with httpx2.AsyncClient(headers=headers) as http:

            async def post() -> None:
                (await http.post(url, content=ping)).raise_for_status()

            return call_ms, await timed(post, calls)
    finally:
        process.terminate()
        await process.wait()


async def main(rounds: int, calls: int) -> None:
    rows: dict[str, list[float]] = {
        "grpc": [],
        "host call_tool": [],
        "mcp-stdio": [],
        "stdio JSON-RPC (no client)": [],
        "mcp-http": [],
        "http ping (SDK floor)": [],
        "sdk MCPServer http": [],
    }
    with tempfile.TemporaryDirectory(prefix="toolbridge-bench-mcp-") as tmp:
        workdir = Path(tmp)
        (workdir / "bench_app.py").write_text(textwrap.dedent(APP.format(journal=str(workdir / "mcp.db"))))
        for _ in range(rounds):
            rows["grpc"].append(await grpc_round(workdir, calls))
            rows["host call_tool"].append(await host_round(workdir, calls))
            rows["mcp-stdio"].append(await mcp_stdio_round(workdir, calls))
            rows["stdio JSON-RPC (no client)"].append(await raw_stdio_round(workdir, calls))
            call_ms, ping_ms = await mcp_http_round(workdir, calls)
            rows["mcp-http"].append(call_ms)
            rows["http ping (SDK floor)"].append(ping_ms)
            rows["sdk MCPServer http"].append(await sdk_http_round(workdir, calls))
    baseline = statistics.median(rows["grpc"])
    print(f"one echo call, {calls} sequential calls, median of {rounds} rounds")
    print(f"{'path':<27} {'p50 ms':>8} {'vs grpc':>8}")
    for name, values in rows.items():
        median = statistics.median(values)
        print(f"{name:<27} {median:>8.2f} {median / baseline:>7.2f}x")
    sdk = statistics.median(rows["sdk MCPServer http"])
    ours = statistics.median(rows["mcp-http"])
    print(f"mcp-http vs an SDK MCPServer on the same transport: {ours / sdk:.2f}x (target: at most 1.5x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=500)
    options = parser.parse_args()
    asyncio.run(main(options.rounds, options.calls))
