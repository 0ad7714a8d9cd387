"""Limits: a command past max_calls is refused, then stopped; a big request is refused."""

import asyncio

from toolbridge import Bridge, ToolOptions

AGENT = """
import asyncio
from inngest_tools import ToolError, tools

async def main():
    for i in range(10):
        try:
            await tools.ping(i)
        except ToolError as error:
            print(i, error.type)  # MaxCallsExceeded: the command is being stopped
            await asyncio.sleep(60)  # it is killed; it does not get to finish

asyncio.run(main())
"""

BIG = """
try:
    await tools.ping("x" * 300_000)
except ToolError as error:
    return error.type
"""


async def main() -> None:
    # --8<-- [start:limits]
    options = ToolOptions(
        tool_timeout=10,  # seconds one attempt may run: ToolTimeout, retried while attempts remain
        max_calls=3,  # calls in one command: MaxCallsExceeded, then the command is stopped
        max_request_bytes=256 * 1024,  # one call's arguments: RequestTooLarge, nothing runs
    )
    async with Bridge(journal="toolbridge.db") as bridge, bridge.run("limits-1") as step:
        result = await step.sandbox.commands.run(
            "agent", ["python3", "-c", AGENT], tools={"ping": lambda i: i}, tool_options=options, timeout=60
        )
        assert result.stopped == "max_calls"
        assert result.stdout == "3 MaxCallsExceeded\n"
        # --8<-- [end:limits]
        too_big = await step.sandbox.python("big", BIG, tools={"ping": lambda value: 1})
        assert too_big == "RequestTooLarge", too_big


asyncio.run(main())
