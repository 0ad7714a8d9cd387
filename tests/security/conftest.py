"""The security suite: real bubblewrap sandboxes, real processes, a real daemon.

Every test here needs bubblewrap and unprivileged user namespaces. On a machine without them
the tests are skipped with the reason; set ``TOOLBRIDGE_REQUIRE_BWRAP=1`` (as ``make test``
does) to make that a failure instead, so that a machine that should isolate never silently
skips the proof that it does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from toolbridge import Bridge
from toolbridge._sandbox.bwrap.launcher import BwrapLauncher, SandboxLimits
from toolbridge._sandbox.bwrap.user import SANDBOX_GID, SANDBOX_UIDS

MIB = 1024 * 1024


def _bwrap_unavailable() -> str | None:
    """Why this machine cannot run bubblewrap sandboxes, or ``None`` if it can.

    Probes the environment only (bwrap present, user namespaces allowed for an unprivileged
    uid), never toolbridge's own launcher: a bug there must fail tests, not skip them.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed (apt-get install -y bubblewrap)"
    probe = [bwrap, "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "--", "true"]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            return "setpriv (util-linux) is not installed"
        uid = SANDBOX_UIDS[0]
        probe = [setpriv, f"--reuid={uid}", f"--regid={SANDBOX_GID}", "--clear-groups", *probe]
    result = subprocess.run(probe, capture_output=True, text=True, cwd="/", check=False)
    if result.returncode != 0:
        return f"bubblewrap cannot create unprivileged user namespaces here: {result.stderr.strip()}"
    return None


_REASON = _bwrap_unavailable()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _REASON is None:
        return
    if os.environ.get("TOOLBRIDGE_REQUIRE_BWRAP") == "1":
        raise pytest.UsageError(f"TOOLBRIDGE_REQUIRE_BWRAP=1 but {_REASON}")
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.skip(reason=_REASON))


TEST_LIMITS = SandboxLimits(memory=256 * MIB, processes=64, open_files=256, cpu_time=60, tmp_size=16 * MIB)
"""Tight enough that nothing a test does can hurt a shared machine."""


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    """A command's folder, readable by the sandbox user (pytest's own are 0700)."""
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


@pytest.fixture
async def sandboxed(journal_path: Path) -> AsyncIterator[Bridge]:
    """A bridge running commands under bubblewrap with test limits."""
    async with Bridge(journal=journal_path, sandbox=BwrapLauncher(limits=TEST_LIMITS)) as opened:
        yield opened


@pytest.fixture
async def unsandboxed(tmp_path: Path) -> AsyncIterator[Bridge]:
    """The plain process launcher, as the control: each attack is shown to work without
    isolation, so a probe that could never succeed cannot pass for a defence."""
    async with Bridge(journal=tmp_path / "control.db", sandbox="process") as opened:
        yield opened
