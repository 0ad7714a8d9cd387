"""Item 1: a sandbox opening connections without end cannot take the daemon's descriptors.

The daemon caps the connections open at once at half its descriptor limit; past the cap a
connection is accepted and closed at once. Here the daemon's limit is lowered to 1024 (a
cap of 512) and a real sandbox, under each launcher, opens 1,500 connections while a
command of another run keeps calling its tool over the connection it already has.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.faults.conftest import DAEMON_DESCRIPTORS, LIMITS
from tests.helpers import WAIT
from tests.security.conftest import _REASON as BWRAP_UNAVAILABLE
from toolbridge import Bridge, ToolOptions
from toolbridge._sandbox.bwrap.launcher import BwrapLauncher
from toolbridge._sandbox.launcher import Launcher
from toolbridge._sandbox.process import ProcessLauncher
from toolbridge._server.transport import connection_cap

CONNECTIONS = 1500

FLOODER = """
import asyncio, os, resource, socket
from inngest_tools import tools

PREFACE = b"PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n" + b"\\x00\\x00\\x00\\x04\\x00\\x00\\x00\\x00\\x00"

async def main():
    await tools.ping()  # its own client connects first, before the cap is reached
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    path = os.environ["TOOLBRIDGE_ADDRESS"].removeprefix("unix:")
    held = []
    for _ in range({connections}):
        conn = socket.socket(socket.AF_UNIX)
        conn.connect(path)
        try:
            conn.sendall(PREFACE)
        except OSError:  # closed by the daemon already: the cap is reached
            pass
        held.append(conn)
    await tools.flooded(len(held))
    await tools.hold()

asyncio.run(main())
"""

OTHER = """
import asyncio
from inngest_tools import tools

async def main():
    while await tools.more():
        pass

asyncio.run(main())
"""


def flood_launcher(launcher: str) -> Launcher:
    """The launcher, with room under bwrap for the flooder's descriptors."""
    if launcher == "process":
        return ProcessLauncher()
    return BwrapLauncher(limits=dataclasses.replace(LIMITS, open_files=4096))


class FloodTools:
    """The flooder's tools: ``ping``; ``flooded`` reports how many it opened; ``hold`` waits
    until :attr:`release` is set."""

    def __init__(self) -> None:
        self.opened: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.release = asyncio.Event()

    async def ping(self) -> str:
        return "pong"

    async def report(self, opened: int) -> None:
        self.opened.set_result(opened)

    async def hold(self) -> None:
        await self.release.wait()

    @property
    def tools(self) -> dict[str, Callable[..., Awaitable[object]]]:
        return {"ping": self.ping, "flooded": self.report, "hold": self.hold}


def _descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.usefixtures("low_descriptor_limit")
@pytest.mark.parametrize("launcher", ["process", "bwrap"])
async def test_a_sandbox_opening_1500_connections_leaves_the_daemon_descriptors_and_another_run_working(
    launcher: str, journal_path: Path, write_script: Callable[[str, str], Path], work_dir: Path
) -> None:
    if launcher == "bwrap" and BWRAP_UNAVAILABLE is not None:
        pytest.skip(BWRAP_UNAVAILABLE)
    assert connection_cap() == DAEMON_DESCRIPTORS // 2
    sandbox = flood_launcher(launcher)
    flooder = write_script("flooder.py", FLOODER.format(connections=CONNECTIONS))
    other = write_script("other.py", OTHER)
    flood = FloodTools()
    stop_other = asyncio.Event()
    other_calls = 0
    during_flood, other_connected = asyncio.Event(), asyncio.Event()

    async def more() -> bool:
        nonlocal other_calls
        other_calls += 1
        other_connected.set()
        if flood.opened.done() and other_calls >= marks[0] + 50:
            during_flood.set()  # fifty calls answered while the flood holds its connections
        return not stop_other.is_set()

    marks = [1 << 30]
    options = ToolOptions(max_calls=1_000_000)
    async with (
        Bridge(journal=journal_path, sandbox=sandbox) as bridge,
        bridge.run("flood") as flood_step,
        bridge.run("other") as other_step,
    ):
        other_task = asyncio.create_task(
            other_step.sandbox.commands.run(
                "other", ["python3", str(other)], tools={"more": more}, tool_options=options, cwd=work_dir
            )
        )
        # Connected before the flood: a connection opened once the cap is full would wait.
        await asyncio.wait_for(other_connected.wait(), WAIT)
        flood_task = asyncio.create_task(
            flood_step.sandbox.commands.run(
                "flooder",
                ["python3", str(flooder)],
                tools=flood.tools,
                cwd=work_dir,
            )
        )
        opened = await asyncio.wait_for(asyncio.shield(flood.opened), WAIT)
        marks[0] = other_calls
        # Every connection was accepted, and the daemon kept at most its cap of them:
        # the descriptors it needs for everything else are still there.
        assert opened == CONNECTIONS
        assert _descriptors() < DAEMON_DESCRIPTORS - 100
        await asyncio.wait_for(during_flood.wait(), WAIT)
        with open(os.devnull) as spare:  # the host can still open a file
            assert spare.fileno() > 0
        flood.release.set()
        flood_result = await asyncio.wait_for(flood_task, WAIT)
        assert flood_result.exit_code == 0, flood_result.stderr
        stop_other.set()
        other_result = await asyncio.wait_for(other_task, WAIT)
        assert other_result.exit_code == 0, other_result.stderr
