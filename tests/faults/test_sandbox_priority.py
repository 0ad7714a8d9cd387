"""Item 2: a sandbox runs at a lower CPU priority than the daemon that serves every command.

So a sandbox busy on the same cores (a flood of calls, a tight loop) slows the daemon's
answers to the other commands less. The command, and what it starts (in the background
too), cannot raise its priority back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.security.conftest import _REASON as BWRAP_UNAVAILABLE
from tests.security.conftest import TEST_LIMITS
from toolbridge import Bridge
from toolbridge._sandbox.bwrap.launcher import BwrapLauncher
from toolbridge._sandbox.launcher import Launcher
from toolbridge._sandbox.process import SANDBOX_NICE, ProcessLauncher

PROBE = """
import json, os, subprocess, sys
own = os.nice(0)
child = subprocess.run([sys.executable, "-c", "import os; print(os.nice(0))"], capture_output=True, text=True)
try:
    os.nice(-1)
    raised = True
except PermissionError:
    raised = False
print(json.dumps({"own": own, "child": int(child.stdout), "raised": raised}))
"""


@pytest.mark.parametrize("sandbox", ["process", "bwrap"])
async def test_the_command_and_its_children_run_at_lower_priority_than_the_daemon(
    sandbox: str, journal_path: Path, work_dir: Path
) -> None:
    if sandbox == "bwrap" and BWRAP_UNAVAILABLE is not None:
        pytest.skip(BWRAP_UNAVAILABLE)
    (work_dir / "probe.py").write_text(PROBE)
    launcher: Launcher = BwrapLauncher(limits=TEST_LIMITS) if sandbox == "bwrap" else ProcessLauncher()
    async with Bridge(journal=journal_path, sandbox=launcher) as bridge, bridge.run() as step:
        result = await step.sandbox.commands.run("probe", ["python3", "probe.py"], cwd=work_dir)
    assert result.exit_code == 0, result.stderr
    seen = json.loads(result.stdout)
    expected = min(19, os.nice(0) + SANDBOX_NICE)
    assert seen["own"] == expected
    assert seen["child"] == expected
    if os.geteuid() != 0 or sandbox == "bwrap":  # a root daemon's plain child stays root
        assert seen["raised"] is False
