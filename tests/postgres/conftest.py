"""A throwaway PostgreSQL cluster for the session, a fresh database per test, and both journals.

``journal_url`` parametrizes a test over both journals: a SQLite file in the test's temp dir
and a fresh database on the cluster. Without PostgreSQL installed the PostgreSQL half is
skipped with the reason; set ``TOOLBRIDGE_REQUIRE_POSTGRES=1`` (as ``make test`` does) to
make that a failure instead, so that CI never silently skips it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pg_cluster import Cluster, running_cluster, unavailable_reason


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get("TOOLBRIDGE_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"TOOLBRIDGE_REQUIRE_POSTGRES=1 but {reason}")
        pytest.skip(reason)
    with running_cluster() as cluster:
        yield cluster


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> str:
    """A fresh, empty database on the session's cluster."""
    return pg_cluster.create_database()


@pytest.fixture(params=["sqlite", "postgres"])
def journal_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a journal lives: a SQLite file, or a PostgreSQL database (each test its own)."""
    if request.param == "sqlite":
        return str(tmp_path / "journal.db")
    url: str = request.getfixturevalue("pg_url")
    return url
