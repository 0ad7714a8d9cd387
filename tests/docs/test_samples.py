"""Every code sample of the documentation runs, as a user would run it.

Each page includes its samples from ``examples/docs/`` (``--8<-- "examples/docs/x.py"``), and
each ``examples/docs/*.py`` is a complete program: this test runs it with the project's Python
in a fresh directory, against a real bridge, a real SQLite journal and real sandboxed
commands (bubblewrap where the sample asks for it; a throwaway PostgreSQL cluster for the
``postgresql_*`` samples, whose URL they read from ``TOOLBRIDGE_JOURNAL``). A sample checks
its own outcome with ``assert``, so a renamed API or a changed behaviour fails here, naming
the sample; where ``x.out`` sits beside ``x.py``, the sample's output must be exactly that. Files
under ``examples/docs/sandbox/`` are the sandbox side, run by the samples. A sample that is not a
program of its own (a module another test imports and runs its own way) says so on its first
line, ``# docs-sample: run by tests/...``, naming that test; it is skipped here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pg_cluster import Cluster, running_cluster, unavailable_reason

SAMPLES = Path(__file__).resolve().parents[2] / "examples" / "docs"


@pytest.fixture(scope="module")
def pg_cluster() -> Iterator[Cluster]:
    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get("TOOLBRIDGE_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"TOOLBRIDGE_REQUIRE_POSTGRES=1 but {reason}")
        pytest.skip(reason)
    with running_cluster() as cluster:
        yield cluster


def test_there_are_samples() -> None:
    assert len(list(SAMPLES.glob("*.py"))) >= 10


@pytest.mark.parametrize("sample", sorted(SAMPLES.glob("*.py")), ids=lambda path: path.name)
def test_the_sample_runs(sample: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    first_line = sample.read_text().partition("\n")[0]
    if first_line.startswith("# docs-sample: run by "):
        runner = first_line.removeprefix("# docs-sample: run by ").strip()
        assert (SAMPLES.parents[1] / runner.split("::")[0]).exists(), f"{sample.name}: no {runner}"
        pytest.skip(f"run by {runner}")
    env = {key: value for key, value in os.environ.items() if not key.startswith("TOOLBRIDGE_JOURNAL")}
    if sample.name.startswith("postgresql_"):
        cluster: Cluster = request.getfixturevalue("pg_cluster")
        env["TOOLBRIDGE_JOURNAL"] = cluster.create_database("docs")
    done = subprocess.run(
        [sys.executable, str(sample)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, (
        f"{sample.name} failed as a program (a module run by another test says so on its first line:"
        f" '# docs-sample: run by tests/...'):\n{done.stdout}\n{done.stderr}"
    )
    expected = sample.with_suffix(".out")
    if expected.exists():
        assert done.stdout == expected.read_text()
