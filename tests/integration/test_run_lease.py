"""Two bridges in one process on one journal: the lease is renewed while a run is open."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from tests.helpers import wait_until
from toolbridge import Bridge, RunBusyError

LEASE = 0.3


def lease_expiry(journal_path: Path, run_id: str) -> float | None:
    with sqlite3.connect(journal_path) as db:
        (expires,) = db.execute("SELECT lease_expires_at FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if expires is None else float(expires) / 1000


async def test_an_open_run_stays_its_holders_past_one_lease(journal_path: Path) -> None:
    async with Bridge(journal=journal_path, run_lease=LEASE) as holder, Bridge(journal=journal_path) as other:
        async with holder.run("r"):
            first = lease_expiry(journal_path, "r")
            assert first is not None
            # Renewed in the background: the first lease has run out, and the run is still held.
            await wait_until(
                lambda: time.time() > first and (lease_expiry(journal_path, "r") or 0) > time.time()
            )
            with pytest.raises(RunBusyError, match="is held by"):
                async with other.run("r"):
                    pass
        # Left: the lease is released, and the other bridge enters at once.
        assert lease_expiry(journal_path, "r") is None
        async with other.run("r"):
            pass


@pytest.mark.parametrize("lease", [0, -1, float("inf"), float("nan"), True, "30"])
def test_run_lease_must_be_a_positive_number_of_seconds(journal_path: Path, lease: object) -> None:
    with pytest.raises(ValueError, match="run_lease must be a positive number of seconds"):
        Bridge(journal=journal_path, run_lease=lease)  # type: ignore[arg-type]
