"""Faults against a real daemon: real sandbox processes, under both launchers where it applies.

``any_bridge`` runs a test once with the plain process launcher and once under bubblewrap
(skipped with the reason on a machine without user namespaces, as the security suite is).
"""

from __future__ import annotations

import resource
import textwrap
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from tests.security.conftest import _REASON as BWRAP_UNAVAILABLE
from toolbridge import Bridge
from toolbridge._sandbox.bwrap.launcher import BwrapLauncher, SandboxLimits
from toolbridge._sandbox.launcher import Launcher
from toolbridge._sandbox.process import ProcessLauncher

MIB = 1024 * 1024
DAEMON_DESCRIPTORS = 1024
"""The daemon's descriptor limit under ``low_descriptor_limit`` (its own socket's cap: 512)."""

LIMITS = SandboxLimits(memory=256 * MIB, processes=64, open_files=256, cpu_time=60, tmp_size=16 * MIB)


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    """A command's folder, readable by the sandbox user (pytest's own are 0700)."""
    tmp_path.chmod(0o755)
    path = tmp_path / "work"
    path.mkdir(mode=0o755)
    path.chmod(0o755)
    return path


@pytest.fixture
def write_script(work_dir: Path) -> Callable[[str, str], Path]:
    def write(name: str, code: str) -> Path:
        path = work_dir / name
        path.write_text(textwrap.dedent(code).lstrip())
        path.chmod(0o644)
        return path

    return write


@pytest.fixture(params=["process", "bwrap"])
async def any_bridge(request: pytest.FixtureRequest, journal_path: Path) -> AsyncIterator[Bridge]:
    if request.param == "bwrap" and BWRAP_UNAVAILABLE is not None:
        pytest.skip(BWRAP_UNAVAILABLE)
    sandbox: Launcher = ProcessLauncher() if request.param == "process" else BwrapLauncher(limits=LIMITS)
    async with Bridge(journal=journal_path, sandbox=sandbox) as opened:
        yield opened


@pytest.fixture
def low_descriptor_limit() -> Iterator[None]:
    """The test process (the daemon) runs with DAEMON_DESCRIPTORS descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (DAEMON_DESCRIPTORS, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
