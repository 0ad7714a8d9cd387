"""Item 1: connections are capped per command, so one sandbox cannot lock the others out.

Each command has a socket of its own, capped at ``ToolOptions.max_connections``. A real
sandbox, under each launcher, opens far more connections than its cap: the daemon holds
no more than the cap of them, and a command that starts *after* the flood (so its client
must open a new connection) makes its calls. With one shared cap, that command was refused
until idle connections closed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.test_connection_cap import FLOODER, OTHER, FloodTools, flood_launcher
from tests.helpers import WAIT, wait_until
from tests.security.conftest import _REASON as BWRAP_UNAVAILABLE
from toolbridge import Bridge, ToolOptions
from toolbridge._server.transport import connection_cap

CONNECTIONS = 1200
CAP = 16


def _socket_descriptors() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            continue
    return count


@pytest.mark.usefixtures("low_descriptor_limit")
@pytest.mark.parametrize("launcher", ["process", "bwrap"])
async def test_a_command_holds_at_most_its_connections_and_a_command_started_after_its_flood_works(
    launcher: str, journal_path: Path, write_script: Callable[[str, str], Path], work_dir: Path
) -> None:
    if launcher == "bwrap" and BWRAP_UNAVAILABLE is not None:
        pytest.skip(BWRAP_UNAVAILABLE)
    assert connection_cap() < CONNECTIONS  # one shared cap would be full
    sandbox = flood_launcher(launcher)
    flooder = write_script("flooder.py", FLOODER.format(connections=CONNECTIONS))
    other = write_script("other.py", OTHER)
    flood = FloodTools()
    other_calls = 0

    async def more() -> bool:
        nonlocal other_calls
        other_calls += 1
        return other_calls < 50

    async with (
        Bridge(journal=journal_path, sandbox=sandbox) as bridge,
        bridge.run("flood") as flood_step,
        bridge.run("other") as other_step,
    ):
        before = _socket_descriptors()
        flood_task = asyncio.create_task(
            flood_step.sandbox.commands.run(
                "flooder",
                ["python3", str(flooder)],
                tools=flood.tools,
                tool_options=ToolOptions(max_connections=CAP),
                cwd=work_dir,
            )
        )
        assert await asyncio.wait_for(asyncio.shield(flood.opened), WAIT) == CONNECTIONS
        # Every connection past the cap was closed as it opened (a few may still be closing).
        assert _socket_descriptors() - before < CAP + 16
        # A command started now connects afresh, to its own socket, and is served.
        other_run = other_step.sandbox.commands.run(
            "other", ["python3", str(other)], tools={"more": more}, cwd=work_dir
        )
        other_result = await asyncio.wait_for(other_run, WAIT)
        assert other_result.exit_code == 0, other_result.stderr
        assert other_calls == 50
        flood.release.set()
        flood_result = await asyncio.wait_for(flood_task, WAIT)
        assert flood_result.exit_code == 0, flood_result.stderr
        # The commands' doors went with them, and the connections their sandboxes held.
        doors = Path(bridge.address.removeprefix("unix:")).parent
        await wait_until(lambda: _socket_descriptors() <= before and not list(doors.glob("command-*")))


def test_max_connections_must_be_a_whole_number_of_at_least_1() -> None:
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match="max_connections"):
            ToolOptions(max_connections=bad)  # type: ignore[arg-type]
