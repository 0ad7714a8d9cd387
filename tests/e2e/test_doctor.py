"""``toolbridge doctor`` on this machine, and on the same machine with a piece taken away."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TOOLBRIDGE = str(Path(sys.executable).with_name("toolbridge"))
NODE = "/usr/bin/node"


def doctor(*args: str, cwd: Path, **env: str) -> tuple[int, dict[str, str], str]:
    """Run ``toolbridge doctor``; (exit status, name -> its line, the closing line)."""
    done = subprocess.run(
        [TOOLBRIDGE, "doctor", *args],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.stderr == ""
    *lines, closing = done.stdout.strip().splitlines()
    checks = {line[9:].split(":", 1)[0]: line for line in lines}
    return done.returncode, checks, closing


def _path_with(tmp_path: Path, *programs: str) -> str:
    """A PATH directory holding only ``programs`` (links to the real ones)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for program in programs:
        (folder / Path(program).name).symlink_to(program)
    return str(folder)


@pytest.mark.parametrize("sandbox", ["process", pytest.param("bwrap", marks=pytest.mark.bwrap)])
def test_a_machine_with_everything_is_ready(tmp_path: Path, sandbox: str) -> None:
    status, checks, closing = doctor("--sandbox", sandbox, "--journal", str(tmp_path / "j.db"), cwd=tmp_path)
    assert (status, closing) == (0, f"toolbridge doctor: ready for sandbox={sandbox!r}")
    expected = [
        "python",
        "node",
        "bubblewrap",
        "user namespaces",
        "cgroups",
        "runtime cache",
        "journal",
        "egress",
    ]
    expected += [
        f"a {kind} under {sandbox}" for kind in ("Python command", "Node command", "TypeScript snippet")
    ]
    assert list(checks) == expected
    assert all(line.startswith(("ok ", "note ")) for line in checks.values()), checks
    assert checks["a Node command under " + sandbox].endswith(" s)")


def test_no_node_on_path_is_missing_with_the_fix(tmp_path: Path) -> None:
    status, checks, closing = doctor("--sandbox", "process", cwd=tmp_path, PATH=_path_with(tmp_path))
    assert status == 1
    assert checks["node"].startswith("missing  node: not on PATH")
    assert "install Node.js 20.6 or later" in checks["node"]
    # The process launcher does not need bubblewrap: said, but not counted.
    assert checks["bubblewrap"].startswith("note ")
    assert closing == "toolbridge doctor: 1 missing for sandbox='process'; commands not tried"


def test_no_bwrap_fails_the_bwrap_launcher_only(tmp_path: Path) -> None:
    path = _path_with(tmp_path, NODE)
    status, checks, closing = doctor("--sandbox", "bwrap", cwd=tmp_path, PATH=path)
    assert status == 1
    assert checks["bubblewrap"].startswith("missing  bubblewrap: not on PATH")
    assert "apt-get install -y bubblewrap" in checks["bubblewrap"]
    assert closing.startswith("toolbridge doctor: 1 missing for sandbox='bwrap'")
    status, checks, _ = doctor("--sandbox", "process", cwd=tmp_path, PATH=path)
    assert status == 0, checks


def test_an_old_node_is_missing_with_the_fix(tmp_path: Path) -> None:
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "node").write_text("#!/bin/sh\necho v18.19.1\n")
    (folder / "node").chmod(0o755)
    status, checks, _ = doctor(cwd=tmp_path, PATH=str(folder))
    assert status == 1
    assert "v18.19.1" in checks["node"]
    assert "is older than 20.6: install Node.js 20.6 or later" in checks["node"]


def test_a_journal_beside_a_file_is_missing_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "not-a-folder").write_text("")
    status, checks, _ = doctor("--journal", str(tmp_path / "not-a-folder" / "j.db"), cwd=tmp_path)
    assert status == 1
    assert checks["journal"].startswith("missing  journal:")
    assert "not-a-folder is not a directory" in checks["journal"]
    assert checks["journal"].endswith("choose another path")


def test_a_journal_that_is_not_sqlite_is_missing(tmp_path: Path) -> None:
    (tmp_path / "j.db").write_text("not a database, but long enough to have a header" * 4)
    status, checks, _ = doctor("--journal", str(tmp_path / "j.db"), cwd=tmp_path)
    assert status == 1
    assert "is not a readable SQLite file" in checks["journal"]


def test_a_missing_node_client_fails_the_node_probes_with_the_reason(tmp_path: Path) -> None:
    status, checks, closing = doctor(cwd=tmp_path, TOOLBRIDGE_NODE_CLIENT=str(tmp_path / "nowhere"))
    assert status == 1
    assert checks["a Python command under process"].startswith("ok ")
    for probe in ("a Node command under process", "a TypeScript snippet under process"):
        assert checks[probe].startswith("missing "), checks[probe]
        assert "is not the inngest_tools Node package" in checks[probe]
    assert closing == "toolbridge doctor: 2 missing for sandbox='process'"


def test_an_unwritable_runtime_cache_is_missing_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    status, checks, _ = doctor(cwd=tmp_path, TOOLBRIDGE_RUNTIME_DIR=str(tmp_path / "file" / "runtime"))
    assert status == 1
    assert "set TOOLBRIDGE_RUNTIME_DIR to a writable directory" in checks["runtime cache"]
