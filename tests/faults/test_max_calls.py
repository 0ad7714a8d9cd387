"""Item 9: a command over its call budget is always reported as stopped for it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from toolbridge import Bridge, ToolOptions

QUITTER = """
import asyncio, json
from inngest_tools import tools, ToolError

async def main():
    seen = []
    for _ in range(5):
        try:
            seen.append(await tools.count())
        except ToolError as exc:
            seen.append(exc.type)
    print(json.dumps(seen))  # and exit at once, well before the daemon's stop grace

asyncio.run(main())
"""


async def test_a_command_that_catches_max_calls_and_ends_at_once_is_still_stopped_for_it(
    any_bridge: Bridge, write_script: Callable[[str, str], Path], work_dir: Path
) -> None:
    write_script("quitter.py", QUITTER)
    ran: list[int] = []

    def count() -> int:
        ran.append(1)
        return len(ran)

    async with any_bridge.run("budget") as step:
        result = await step.sandbox.commands.run(
            "quitter",
            "python3 quitter.py",
            tools={"count": count},
            tool_options=ToolOptions(max_calls=2),
            cwd=work_dir,
        )
    assert result.stopped == "max_calls"
    # Every call after the refusal was refused too: none of them reached the tool.
    assert json.loads(result.stdout) == [1, 2, "MaxCallsExceeded", "MaxCallsExceeded", "MaxCallsExceeded"]
    assert len(ran) == 2
    async with any_bridge.run("budget") as step:  # the journal says so too
        replayed = await step.sandbox.commands.run(
            "quitter", "python3 quitter.py", tools={"count": count}, cwd=work_dir
        )
    assert (replayed.replayed, replayed.stopped) == (True, "max_calls")
