"""Where the daemon serves: a private Unix socket by default, TCP when asked."""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

from toolbridge import Bridge

AGENT = """
import asyncio
from inngest_tools import tools, definitions

async def main():
    print(await tools.add(2, 3))
    print(sorted(d["name"] for d in await definitions()))

asyncio.run(main())
"""


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_the_socket_lives_in_a_private_directory(bridge: Bridge) -> None:
    assert bridge.address.startswith("unix:")
    socket = Path(bridge.address.removeprefix("unix:"))
    assert stat.S_ISSOCK(socket.stat().st_mode)
    assert stat.S_IMODE(socket.parent.stat().st_mode) == 0o700


async def test_the_private_directory_is_removed_on_close(journal_path: Path) -> None:
    async with Bridge(journal=journal_path) as bridge:
        directory = Path(bridge.address.removeprefix("unix:")).parent
        assert directory.exists()
    assert not directory.exists()


async def test_a_tcp_listener_serves_commands(
    journal_path: Path, tmp_path: Path, script: Callable[[str, str], Path]
) -> None:
    script("agent.py", AGENT)
    async with Bridge(journal=journal_path, listen="127.0.0.1:0") as bridge:
        host, port = bridge.address.rsplit(":", 1)
        assert host == "127.0.0.1"
        assert int(port) > 0
        async with bridge.run() as step:
            result = await step.sandbox.commands.run(
                "agent", "python3 agent.py", tools={"add": add}, cwd=tmp_path
            )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "5\n['add']\n"


async def test_a_socket_path_can_be_given(tmp_path: Path, script: Callable[[str, str], Path]) -> None:
    script("agent.py", AGENT)
    socket = tmp_path / "my.sock"
    async with Bridge(journal=None, socket=socket) as bridge:
        assert bridge.address == f"unix:{socket}"
        async with bridge.run() as step:
            result = await step.sandbox.commands.run(
                "agent", "python3 agent.py", tools={"add": add}, cwd=tmp_path
            )
    assert result.stdout.startswith("5\n"), result.stderr
