"""`make demo`, the README's first command: the demo program runs to its end under bubblewrap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.py"


@pytest.mark.bwrap
def test_the_demo_runs_calls_tools_and_replays() -> None:
    done = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "customer: Acme Corp (12 seats)" in done.stdout
    assert "a runner snippet returned: 120" in done.stdout
    assert "replayed from the journal without running: True, total 120" in done.stdout
    assert "run demo-order-42  completed" in done.stdout
