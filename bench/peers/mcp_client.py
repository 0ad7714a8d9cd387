"""Peer: the MCP SDK's stdio client calling `echo` N times; prints {"latencies_ms": [...]}.

Usage: python mcp_client.py SERVER_SCRIPT N
"""

import asyncio
import json
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

WARMUP = 50


async def main(server_script: str, count: int) -> None:
    params = StdioServerParameters(command=sys.executable, args=[server_script])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for _ in range(WARMUP):
            await session.call_tool("echo", {"value": "warm"})
        latencies = []
        for _ in range(count):
            started = time.perf_counter()
            await session.call_tool("echo", {"value": "x"})
            latencies.append((time.perf_counter() - started) * 1000)
    print(json.dumps({"latencies_ms": latencies}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
