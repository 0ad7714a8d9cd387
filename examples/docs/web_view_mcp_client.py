# docs-sample: run by tests/faces/test_web_docs_examples.py
"""Call `toolbridge mcp --http` with its bearer token, from the official MCP SDK's client.

``toolbridge mcp app:bridge --http 127.0.0.1:8765`` prints two lines: the server's URL
(``TOOLBRIDGE_MCP_URL=``) and its token (``TOOLBRIDGE_MCP_TOKEN=``). Pass both here.
"""

import asyncio
import os

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    url, token = os.environ["TOOLBRIDGE_MCP_URL"], os.environ["TOOLBRIDGE_MCP_TOKEN"]
    headers = {"authorization": f"Bearer {token}"}  # without it: 401, on loopback too
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        tools = await client.list_tools()
        print(sorted(tool.name for tool in tools.tools))


if __name__ == "__main__":
    asyncio.run(main())
