"""The warm pool's rules, with a launcher that starts nothing: what fits a warm sandbox, how many
wait, and when they are let go. (Real sandboxes: tests/e2e/test_warm_sandboxes.py.)"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from tests.helpers import WAIT, wait_until
from toolbridge._sandbox.launcher import LaunchSpec, ProcessOutcome, StopSignal
from toolbridge._sandbox.warm import WarmPools, WarmSandbox

RUNNER = ["python3", "-m", "inngest_tools._runner"]


class WaitingLauncher:
    """Starts nothing; a 'sandbox' runs until it is stopped, and says what it was given."""

    name = "waiting"
    takes_stdin = True

    def __init__(self) -> None:
        self.started: list[LaunchSpec] = []
        self.ran: list[LaunchSpec] = []

    async def run(self, spec: LaunchSpec, stop: StopSignal) -> ProcessOutcome:
        (self.started if spec.stdin is not None else self.ran).append(spec)
        await stop.event.wait()
        return ProcessOutcome(exit_code=-9, stdout=b"", stderr=b"", stopped=stop.reason)


def _spec(tmp_path: Path, **changes: object) -> LaunchSpec:
    base = LaunchSpec(
        argv=["python3", "-m", "inngest_tools._warm"],
        env={"PATH": "/usr/bin", "PYTHONUNBUFFERED": "1", "TOOLBRIDGE_ADDRESS": "unix:/s/bridge.sock"},
        cwd=tmp_path,
        timeout=1e9,
        read_only_paths=[Path("/runtime")],
        writable_paths=[tmp_path],
        socket_dir=Path("/s"),
        hidden_paths=[Path("/state")],
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _command(tmp_path: Path, **changes: object) -> LaunchSpec:
    env = {"PATH": "/usr/bin", "PYTHONUNBUFFERED": "1", "TOOLBRIDGE_ADDRESS": "unix:/s/bridge.sock"}
    command = _spec(
        tmp_path,
        argv=[*RUNNER, "snippet.py"],
        env={**env, "TOOLBRIDGE_TOKEN": "tb1.x", "SECRET": "s"},
        timeout=5,
    )
    return dataclasses.replace(command, **changes)  # type: ignore[arg-type]


async def test_a_command_fits_only_what_the_sandbox_was_started_with(tmp_path: Path) -> None:
    launcher = WaitingLauncher()
    sandbox = WarmSandbox(launcher, _spec(tmp_path), RUNNER)
    try:
        assert sandbox.fits(_command(tmp_path))
        env = dict(_command(tmp_path).env)
        misfits = [
            _command(tmp_path, argv=["node", "runner.js", "snippet.ts"]),
            _command(tmp_path, cwd=tmp_path / "elsewhere"),
            _command(tmp_path, writable_paths=[tmp_path, Path("/replay")]),
            _command(tmp_path, read_only_paths=[Path("/runtime"), Path("/door")]),
            _command(tmp_path, socket_dir=Path("/other")),
            _command(tmp_path, hidden_paths=[]),
            _command(tmp_path, output_limit=1),
            _command(tmp_path, env={**env, "PYTHONPATH": "/lib"}),  # read as the interpreter starts
            _command(tmp_path, env={**env, "PATH": "/bin"}),
            _command(tmp_path, env={key: value for key, value in env.items() if key != "PYTHONUNBUFFERED"}),
        ]
        assert [sandbox.fits(spec) for spec in misfits] == [False] * len(misfits)
    finally:
        sandbox.discard()
        await asyncio.wait_for(sandbox.gone(), WAIT)


async def test_a_command_that_does_not_fit_runs_in_a_sandbox_of_its_own(tmp_path: Path) -> None:
    launcher = WaitingLauncher()
    sandbox = WarmSandbox(launcher, _spec(tmp_path), RUNNER)
    stop = StopSignal()
    other = _command(tmp_path, env={**_command(tmp_path).env, "LD_PRELOAD": "x.so"})
    running = asyncio.ensure_future(sandbox.run(other, stop))
    await asyncio.wait_for(sandbox.gone(), WAIT)  # let go unused
    stop.stop("cancelled")
    await asyncio.wait_for(running, WAIT)
    assert launcher.ran == [other]
    with pytest.raises(RuntimeError, match="one command"):
        await sandbox.run(_command(tmp_path), StopSignal())


async def test_a_pool_starts_nothing_before_it_is_asked_and_keeps_at_most_its_size(tmp_path: Path) -> None:
    launcher = WaitingLauncher()
    pools = WarmPools(2)
    made: list[WarmSandbox] = []

    def start() -> WarmSandbox:
        made.append(WarmSandbox(launcher, _spec(tmp_path), RUNNER))
        return made[-1]

    assert pools.ready("k") == []
    assert pools.take("k", start) is None  # the first is cold, and nothing starts meanwhile
    assert made == []
    pools.refill("k", start)  # once it has ended
    await wait_until(lambda: len(made) == 2)
    # Two taken (each replaced once it has ended); then dry: those start cold, and the pool
    # is topped up only as commands end (not in the middle of a burst).
    taken = [pools.take("k", start) for _ in range(5)]
    assert [sandbox is not None for sandbox in taken] == [True, True, False, False, False]
    assert pools.ready("k") == []
    for sandbox in taken:
        if sandbox is not None:
            sandbox.discard()
    await wait_until(lambda: len(pools.ready("k")) == 2)
    assert len(made) == 4
    await pools.close()
    assert all(not sandbox.alive for sandbox in made)
    assert pools.take("k", start) is None  # a bridge entered again starts afresh, cold first
    await pools.close()


async def test_a_key_nobody_asks_for_lets_its_sandboxes_go(tmp_path: Path) -> None:
    launcher = WaitingLauncher()
    pools = WarmPools(1, idle=0.5)  # the refill comes 0.05 s after a command
    made: list[WarmSandbox] = []

    def start() -> WarmSandbox:
        made.append(WarmSandbox(launcher, _spec(tmp_path), RUNNER))
        return made[-1]

    pools.take("k", start)
    pools.refill("k", start)
    await wait_until(lambda: len(made) == 1)
    await asyncio.wait_for(made[0].gone(), WAIT)
    assert pools.ready("k") == []
    await pools.close()


async def test_size_zero_is_off() -> None:
    pools = WarmPools(0)
    assert pools.take("k", lambda: pytest.fail("started")) is None
