"""Item 6 (the rest): a run whose daemon was SIGKILLed is shown ``interrupted``, not ``running``.

The journal keeps saying ``running`` (only a daemon finishes a run); the readers compare the
run's lease with the clock: a holder that lives renews it, a dead one does not.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from tests.faults.host_programs import SLEEPING_HOST, sigkilled_at_the_end
from tests.faults.test_graceful_shutdown import processes_with
from tests.helpers import wait_until
from toolbridge._journal.base import open_journal
from toolbridge._ui.view import run_view

WAIT = 60.0
LEASE = 1.0  # seconds: short, so the dead host's lease runs out soon
CLI = Path(sys.executable).with_name("toolbridge")


async def cli(*args: str) -> str:
    """The CLI, as a person would run it: another process reading the same journal."""
    process = await asyncio.create_subprocess_exec(
        str(CLI),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200"},
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 0, stderr.decode()
    return stdout.decode()


async def runs_json(journal: Path) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads(await cli("runs", "--journal", str(journal), "--json"))
    return runs


async def test_a_run_whose_host_was_sigkilled_is_shown_interrupted_once_its_lease_ran_out(
    tmp_path: Path, work_dir: Path, journal_path: Path
) -> None:
    (tmp_path / "host.py").write_text(SLEEPING_HOST)
    marker = "sleeper-" + secrets.token_hex(6)
    host = await asyncio.create_subprocess_exec(
        sys.executable,
        str(tmp_path / "host.py"),
        str(journal_path),
        "process",
        str(work_dir),
        marker,
        str(LEASE),
        stdout=asyncio.subprocess.PIPE,
    )
    async with sigkilled_at_the_end(host):
        assert host.stdout is not None
        await asyncio.wait_for(host.stdout.readline(), WAIT)
        await wait_until(lambda: bool(processes_with(marker)))
        # Alive, the host renews its lease: the run is running, past several leases.
        (alive,) = await runs_json(journal_path)
        first_lease = alive["lease_expires_at"]
        await wait_until(lambda: time.time() > first_lease + LEASE)
        (alive,) = await runs_json(journal_path)
        assert alive["status"] == "running"
        assert alive["owner"] is not None
    (dead,) = await runs_json(journal_path)
    await wait_until(lambda: time.time() > dead["lease_expires_at"])
    (dead,) = await runs_json(journal_path)
    assert dead["status"] == "interrupted"
    assert dead["lease_expires_at"] is not None  # the lease that ran out is still shown
    assert "interrupted" in await cli("runs", "--journal", str(journal_path))
    traced = await cli("trace", "sleepy", "--journal", str(journal_path))
    assert "sleepy" in traced
    assert "interrupted" in traced
    traced_json = json.loads(await cli("trace", "sleepy", "--journal", str(journal_path), "--json"))
    assert traced_json["status"] == "interrupted"
    # The web view's model says the same, and marks the command's step interrupted.
    journal = open_journal(journal_path)
    await journal.open()
    try:
        run = await journal.get_run("sleepy")
        assert run is not None
        assert run.status == "running"  # the journal itself is unchanged
        view = run_view(run, await journal.load_steps("sleepy"))
    finally:
        await journal.close()
    assert view["status"] == "interrupted"
    assert [node["marker"] for node in view["tree"]] == ["interrupted"]
