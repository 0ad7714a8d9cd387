"""Item 7: a sync tool past its ``tool_timeout`` never overlaps the next attempt of its step."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

from toolbridge import Bridge, ToolContext, ToolOptions, tool

CALLER = """
import asyncio, json
from inngest_tools import tools

print(json.dumps(asyncio.run(tools.slow())))
"""

HOLD = 1.0
"""Seconds the first attempt outlives its 0.1 s timeout (it blocks on an event nobody sets)."""


async def test_the_retry_of_a_sync_tool_past_its_timeout_waits_for_the_first_attempts_thread(
    any_bridge: Bridge, write_script: Callable[[str, str], Path], work_dir: Path
) -> None:
    write_script("caller.py", CALLER)
    lock = threading.Lock()
    running: list[int] = []
    overlaps: list[tuple[int, ...]] = []
    keys: set[str] = set()
    never = threading.Event()

    def slow(args: object, ctx: ToolContext) -> int:
        with lock:
            running.append(ctx.attempt)
            if len(running) > 1:
                overlaps.append(tuple(running))
            keys.add(ctx.idempotency_key)
        try:
            if ctx.attempt == 1:
                never.wait(HOLD)  # well past the timeout: the thread cannot be stopped
            return ctx.attempt
        finally:
            with lock:
                running.remove(ctx.attempt)

    options = ToolOptions(tool_timeout=0.1, attempts=2, retry_backoff=0.01, retry_backoff_max=0.01)
    async with any_bridge.run() as step:
        result = await step.sandbox.commands.run(
            "caller",
            "python3 caller.py",
            tools={"slow": tool.step(run=slow)},
            tool_options=options,
            cwd=work_dir,
        )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == 2  # the second attempt's value
    assert overlaps == []  # the second attempt started only once the first had returned
    assert len(keys) == 1
