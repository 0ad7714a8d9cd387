"""The strict build catches what it is there to catch: each defect below fails it, by name.

Each test builds a copy of the site (the same mkdocs.yml, hooks, pages and samples) in a temp
dir; the first builds it unchanged, so that the failures of the others are the defects'.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def site_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "repo"
    for part in ("docs", "scripts", "examples/docs", "proto", "daemon", "clients/python"):
        skip = shutil.ignore_patterns("__pycache__", "node_modules")
        shutil.copytree(ROOT / part, copy / part, ignore=skip)
    (copy / "bench").mkdir()
    shutil.copy(ROOT / "bench" / "results.md", copy / "bench" / "results.md")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    return copy


def build(copy: Path) -> subprocess.CompletedProcess[str]:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(copy / "site")],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_copy_builds(tmp_path: Path) -> None:
    copy = site_copy(tmp_path)
    done = build(copy)
    assert done.returncode == 0, done.stderr
    # The docstrings' Sphinx roles are rendered as the name alone, not ":class:`Bridge`".
    bridge = (copy / "site" / "reference" / "bridge" / "index.html").read_text()
    assert "<code>Bridge</code>" in bridge
    roles = [
        p
        for p in (copy / "site").rglob("*.html")
        if re.search(r":(class|meth|func|attr):<code>", p.read_text())
    ]
    assert roles == []


def test_a_broken_link_a_broken_anchor_and_a_page_outside_the_nav_fail_the_build(tmp_path: Path) -> None:
    copy = site_copy(tmp_path)
    page = copy / "docs" / "guides" / "limits.md"
    page.write_text(page.read_text() + "\n[gone](no-such-page.md) and [here](runners.md#no-such-anchor)\n")
    (copy / "docs" / "explanations" / "orphan.md").write_text("# Orphan\n")
    done = build(copy)
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr
    assert "no-such-anchor" in done.stderr
    assert "explanations/orphan.md" in done.stderr


def test_a_missing_sample_fails_the_build(tmp_path: Path) -> None:
    copy = site_copy(tmp_path)
    (copy / "examples" / "docs" / "limits.py").unlink()
    done = build(copy)
    assert done.returncode != 0
    assert "examples/docs/limits.py" in done.stderr


def test_make_docs_runs_the_strict_build_without_hiding_its_warnings() -> None:
    # `mkdocs build --strict --quiet` passes whatever is broken: quiet drops the warnings that
    # strict counts. `make docs` (part of `make test`) must run the build these tests run.
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile[makefile.index("\ndocs:") :].split("\n\n")[0]
    assert "mkdocs build --strict" in recipe
    assert "--quiet" not in recipe
    assert " -q" not in recipe
