"""Durable runs: a run entered again replays; a changed step is refused; retries."""

import asyncio
import subprocess
import sys
from pathlib import Path

from toolbridge import Bridge, ReplayMismatchError, ToolContext, ToolError, ToolOptions, tool

executions: list[str] = []
flaky_attempts: list[int] = []


def charge(order_id: str) -> dict[str, str]:
    executions.append(order_id)  # counts real executions: a replay adds none
    return {"order_id": order_id, "status": "charged"}


def flaky(args: dict[str, str], ctx: ToolContext) -> str:
    flaky_attempts.append(ctx.attempt)
    if ctx.attempt < 2:
        raise ToolError("the payment API is busy", retryable=True)  # retried with backoff
    return "ok"


TOOLS = {"charge": charge, "flaky": tool.step(run=flaky)}
SNIPPET = 'return [await tools.charge("o-1"), await tools.flaky()]'


async def main() -> None:
    # --8<-- [start:replay]
    async with Bridge(journal="toolbridge.db") as bridge:
        async with bridge.run("order-42") as step:
            first = await step.sandbox.python("pay", SNIPPET, tools=TOOLS)
            seats = await step.run("seats", lambda: 12)  # a host step, journaled too

        # The same run id again: every completed step returns its recorded result.
        async with bridge.run("order-42") as step:
            again = await step.sandbox.python("pay", SNIPPET, tools=TOOLS)
            assert again == first and await step.run("seats", lambda: 99) == seats == 12

        # Other code under a recorded step id is refused, not silently replayed.
        async with bridge.run("order-42") as step:
            try:
                await step.sandbox.python("pay", "return 1", tools=TOOLS)
            except ReplayMismatchError as error:
                print(error)  # step 'pay' (python) changed: ...
            else:
                raise AssertionError("a changed step must be refused")
    # --8<-- [end:replay]
    assert executions == ["o-1"], executions
    assert flaky_attempts == [1, 2], flaky_attempts

    # --8<-- [start:options]
    options = ToolOptions(attempts=5, retry_backoff=0.1, retry_backoff_max=2, tool_timeout=10)
    # --8<-- [end:options]
    async with Bridge(journal=None) as bridge, bridge.run() as step:
        assert await step.sandbox.python("once", "return 1", tool_options=options) == 1

    toolbridge = Path(sys.executable).with_name("toolbridge")
    trace = subprocess.run(
        [toolbridge, "trace", "order-42", "--journal", "toolbridge.db"],
        capture_output=True,
        text=True,
        check=True,
    )
    print(trace.stdout)
    assert "run order-42  completed" in trace.stdout


asyncio.run(main())
