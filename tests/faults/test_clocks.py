"""Item 8: waits keep their length, and events are found, when the wall clock jumps.

The wall clock is moved inside the daemon's process (``time.time``, which the journal and
the steps read), as an NTP step or an operator would move it; the boot clock is not.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolbridge import Bridge, ToolContext, ToolOptions, tool
from toolbridge._durable.eventbus import EventBus

HOUR = 3600.0


class WallClock:
    """Moves ``time.time`` by ``offset`` seconds."""

    def __init__(self) -> None:
        self.offset = 0.0
        self._real = time.time

    def __call__(self) -> float:
        return self._real() + self.offset


@pytest.fixture
def wall_clock(monkeypatch: pytest.MonkeyPatch) -> WallClock:
    clock = WallClock()
    monkeypatch.setattr(time, "time", clock)
    return clock


@pytest.fixture
def wait_registered(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """Set once a wait step has registered with the event bus (and looked in the journal)."""
    registered = asyncio.Event()
    wait = EventBus.wait

    async def tracked(self: EventBus, *args: Any, **kwargs: Any) -> Any:
        registered.set()
        return await wait(self, *args, **kwargs)

    monkeypatch.setattr(EventBus, "wait", tracked)
    return registered


WAITER = """
import asyncio, json
from inngest_tools import tools

print(json.dumps(asyncio.run(tools.waitForPayment())))
"""


def waiter_tool(timeout: float) -> Any:
    async def wait_for_payment(args: object, ctx: ToolContext) -> Any:
        event = await ctx.step.wait_for_event("paid", event="order/paid", timeout=timeout)
        return None if event is None else event.data

    return tool.group(run=wait_for_payment)


async def test_an_event_sent_after_the_clock_went_back_an_hour_is_found(
    any_bridge: Bridge,
    write_script: Callable[[str, str], Path],
    work_dir: Path,
    wall_clock: WallClock,
    wait_registered: asyncio.Event,
) -> None:
    write_script("waiter.py", WAITER)
    async with any_bridge.run() as step:
        command = asyncio.ensure_future(
            step.sandbox.commands.run(
                "waiter", "python3 waiter.py", tools={"waitForPayment": waiter_tool(20)}, cwd=work_dir
            )
        )
        await asyncio.wait_for(wait_registered.wait(), 30)
        wall_clock.offset = -HOUR
        await any_bridge.send_event("order/paid", {"order": 42})
        result = await asyncio.wait_for(command, 15)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {"order": 42}


async def test_a_wait_ends_at_its_timeout_when_the_clock_went_back_an_hour(
    any_bridge: Bridge,
    write_script: Callable[[str, str], Path],
    work_dir: Path,
    wall_clock: WallClock,
    wait_registered: asyncio.Event,
) -> None:
    write_script("waiter.py", WAITER)
    options = ToolOptions(wait_window=0.2)
    async with any_bridge.run() as step:
        command = asyncio.ensure_future(
            step.sandbox.commands.run(
                "waiter",
                "python3 waiter.py",
                tools={"waitForPayment": waiter_tool(1.0)},
                tool_options=options,
                cwd=work_dir,
            )
        )
        await asyncio.wait_for(wait_registered.wait(), 30)
        wall_clock.offset = -HOUR
        result = await asyncio.wait_for(command, 15)  # not an hour and a second
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) is None


@pytest.mark.parametrize("jump", [-HOUR, HOUR], ids=["back", "forward"])
async def test_a_durable_sleep_replayed_after_a_clock_jump_sleeps_what_was_left(
    bridge: Bridge, wall_clock: WallClock, jump: float
) -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        async with bridge.run("nap") as step:
            await asyncio.wait_for(step.sleep("nap", 1.0), 0.3)  # interrupted mid-sleep
    wall_clock.offset = jump
    async with bridge.run("nap") as step:  # the replay resumes the sleep
        await asyncio.wait_for(step.sleep("nap", 1.0), 10)  # back: does not hang for an hour
    # Forward: the replay does not wake at once; the sleep lasted what it was asked to.
    assert time.monotonic() - started >= 0.95
