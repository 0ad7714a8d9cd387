"""Item 6: a host killed with SIGKILL takes its sandboxes with it, and the next one sweeps up."""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from pathlib import Path

import pytest

from tests.faults.host_programs import SLEEPING_HOST, sigkilled_at_the_end
from tests.faults.test_graceful_shutdown import processes_with
from tests.helpers import wait_until
from tests.security.conftest import _REASON as BWRAP_UNAVAILABLE
from toolbridge import Bridge
from toolbridge._sandbox.bwrap import cgroups
from toolbridge._sandbox.bwrap.launcher import BwrapLauncher
from toolbridge._sandbox.launcher import Launcher
from toolbridge._sandbox.process import ProcessLauncher

WAIT = 60.0


def cgroups_of(pid: int) -> list[Path]:
    return [
        group
        for parent in cgroups.available_parents().values()
        for group in parent.glob(f"toolbridge-{pid}-*")
    ]


def sleepers(marker: str, host: asyncio.subprocess.Process) -> list[int]:
    """The host's marked commands that run Python (not a wrapper still on its way to exec it).

    The host has the marker in its own command line too.
    """
    found = []
    for pid in processes_with(marker):
        if pid == host.pid:
            continue
        try:
            if Path(f"/proc/{pid}/comm").read_text().startswith("python"):
                found.append(pid)
        except OSError:
            continue
    return found


async def start_host(tmp_path: Path, *argv: str) -> tuple[asyncio.subprocess.Process, str]:
    (tmp_path / "host.py").write_text(SLEEPING_HOST)
    host = await asyncio.create_subprocess_exec(
        sys.executable, str(tmp_path / "host.py"), *argv, stdout=asyncio.subprocess.PIPE
    )
    assert host.stdout is not None
    address = (await asyncio.wait_for(host.stdout.readline(), WAIT)).decode().strip()
    return host, address


@pytest.mark.parametrize("sandbox", ["process", "bwrap"])
async def test_a_sigkilled_host_takes_its_sandbox_along_and_the_next_bridge_removes_what_it_left(
    sandbox: str, tmp_path: Path, work_dir: Path, journal_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if sandbox == "bwrap" and BWRAP_UNAVAILABLE is not None:
        pytest.skip(BWRAP_UNAVAILABLE)
    marker = "sleeper-" + secrets.token_hex(6)
    host, address = await start_host(tmp_path, str(journal_path), sandbox, str(work_dir), marker)
    async with sigkilled_at_the_end(host):
        socket_dir = Path(address.removeprefix("unix:")).parent
        # The command itself, past the wrapper that arms its parent-death signal.
        await wait_until(lambda: bool(sleepers(marker, host)))
        groups = cgroups_of(host.pid)
    # Every stage of the sandbox dies with the daemon (bwrap, setpriv, the command).
    await wait_until(lambda: not processes_with(marker), timeout=15)
    assert socket_dir.name.startswith(f"toolbridge-{host.pid}-")
    assert socket_dir.exists()  # a SIGKILLed daemon cleans nothing up itself

    monkeypatch.setattr(BwrapLauncher, "_swept", False)
    launcher: Launcher = BwrapLauncher() if sandbox == "bwrap" else ProcessLauncher()
    async with Bridge(journal=tmp_path / "next.db", sandbox=launcher) as bridge:
        assert not socket_dir.exists()  # the next bridge removed the dead daemon's directory
        assert Path(bridge.address.removeprefix("unix:")).parent.name.startswith(f"toolbridge-{os.getpid()}-")
        if sandbox == "bwrap":
            async with bridge.run() as step:
                result = await step.sandbox.commands.run("true", ["true"], cwd=work_dir)
            assert result.exit_code == 0, result.stderr
    assert [group for group in groups if group.exists()] == []  # and its cgroups


async def test_what_a_process_launcher_command_left_behind_a_sigkilled_host_is_killed_by_the_next_bridge(
    tmp_path: Path, work_dir: Path, journal_path: Path
) -> None:
    marker = "orphan-" + secrets.token_hex(6)
    argv = (str(journal_path), "process", str(work_dir), marker, "30", "background")
    host, _ = await start_host(tmp_path, *argv)
    async with sigkilled_at_the_end(host):
        await wait_until(lambda: bool(sleepers(marker, host)))
    # The shell died with the daemon; its child never had the parent-death signal.
    await wait_until(lambda: not [pid for pid in processes_with(marker) if pid not in sleepers(marker, host)])
    (orphan,) = sleepers(marker, host)
    async with Bridge(journal=tmp_path / "next.db", sandbox=ProcessLauncher()):
        await wait_until(lambda: orphan not in processes_with(marker), timeout=15)
