"""The journal on PostgreSQL at its fastest: a Unix socket, ``durability="normal"``.

Run with TOOLBRIDGE_JOURNAL=postgresql://user@/db?host=/run/postgresql in the environment
(the server's socket directory; the tests give a throwaway cluster's).
"""

import asyncio
import os

from toolbridge import Bridge


def echo(value: str) -> str:
    return value


async def main() -> None:
    url = os.environ["TOOLBRIDGE_JOURNAL"]
    assert "host=/" in url, "this sample reaches the server through its Unix socket"
    # --8<-- [start:socket]
    # postgresql://USER@/DATABASE?host=/run/postgresql : the socket directory, no TCP
    bridge = Bridge(journal=url, durability="normal", tools={"echo": echo})
    async with bridge, bridge.run("fast") as step:
        # Each call's outcome is committed (one statement, one round trip) before its answer.
        said = await step.sandbox.python("one", 'return await tools.echo("hi")', tools=bridge.tools)
    # --8<-- [end:socket]
    assert said == "hi"


asyncio.run(main())
