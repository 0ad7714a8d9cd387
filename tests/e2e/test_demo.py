"""`make demo`, the README's first command: the demo program runs to its end under bubblewrap.

Its refund above 1000 waits for a person: unattended, the demo approves it itself after showing
the command; given time, a person decides it from the CLI while the demo waits.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.py"
TOOLBRIDGE = Path(sys.executable).with_name("toolbridge")
WAIT = 300


def _check_the_rest(stdout: str) -> None:
    assert "customer: Acme Corp (12 seats)" in stdout
    assert "refund of 5000: refunded" in stdout
    assert "a runner snippet returned: 120" in stdout
    assert "replayed from the journal without running: True, total 120" in stdout
    assert "run demo-order-42  completed" in stdout
    # The trace shows the wait once, with how long it took and how it ended.
    assert stdout.count("waited for a person's decision") == 1
    assert "waited for a person's decision: approved  " in stdout


@pytest.mark.bwrap
def test_the_demo_runs_calls_tools_and_replays_unattended() -> None:
    done = subprocess.run(
        [sys.executable, str(DEMO)], capture_output=True, text=True, timeout=WAIT, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stderr
    assert 'Approve refund(invoice_id="inv_2", amount=5000)?' in done.stdout
    assert "unattended: nobody is at the terminal: the demo approves it itself" in done.stdout
    _check_the_rest(done.stdout)


@pytest.mark.bwrap
def test_a_person_decides_the_demos_refund_from_the_cli_while_it_waits() -> None:
    env = {**os.environ, "TOOLBRIDGE_DEMO_WAIT": str(WAIT)}
    with subprocess.Popen(
        [sys.executable, str(DEMO)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as demo:
        assert demo.stdout is not None
        lines: list[str] = []
        for line in demo.stdout:  # blocks on the demo's output, which it flushes when it asks
            lines.append(line)
            if line.strip().startswith("toolbridge approvals approve "):
                command = line.split()
                break
        else:
            raise AssertionError("".join(lines) + demo.stderr.read() if demo.stderr else "")
        decided = subprocess.run(
            [str(TOOLBRIDGE), *command[1:], "--as", "dana"], capture_output=True, text=True, timeout=WAIT
        )
        assert decided.returncode == 0, decided.stderr
        rest, err = demo.communicate(timeout=WAIT)
    assert demo.returncode == 0, err
    assert "decided from the CLI: approved by dana" in rest
    _check_the_rest("".join(lines) + rest)
