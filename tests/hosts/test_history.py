"""The history checker's short schedule (tests/hosts/history.py has the whole story; the long
one is ``bench/partition_soak.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.hosts import netns
from tests.hosts.history import run_schedule
from tests.pg_cluster import unavailable_reason


async def test_a_seeded_schedule_of_faults_loses_and_doubles_nothing(tmp_path: Path) -> None:
    for reason, required in (
        (netns.available(), "TOOLBRIDGE_REQUIRE_NETNS"),
        (unavailable_reason(), "TOOLBRIDGE_REQUIRE_POSTGRES"),
    ):
        if reason is not None:
            if os.environ.get(required) == "1":
                pytest.fail(f"{required}=1 but {reason}")
            pytest.skip(reason)
    figures = await run_schedule(tmp_path, seed=7, faults=8)
    print("\n".join(figures.lines()))
    assert sum(figures.faults.values()) == 8
    assert set(figures.faults) >= {
        "sandbox_cut",
        "sandbox_flap",
        "journal_cut",
        "daemon_kill",
        "postgres_restart",
    }
    assert figures.acknowledged > 0
    assert set(figures.executions_by_daemon) == {"A", "B"}  # both daemons served their sandboxes
    assert "calls answered INTERNAL" not in str(figures.daemons)
    assert figures.results_checked == figures.acknowledged
    assert figures.lost == []
    assert figures.completed_run_again == []
    assert figures.at_most_once_doubled == []
