"""Item 13: a relative ``cwd=`` is the host's, under bubblewrap as under the process launcher."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from toolbridge import Bridge


@pytest.mark.parametrize("relative", ["work", ".", "./work/../work"])
async def test_a_relative_cwd_is_resolved_against_the_hosts_working_directory(
    any_bridge: Bridge,
    write_script: Callable[[str, str], Path],
    work_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    relative: str,
) -> None:
    write_script("where.py", "import os; print(os.getcwd()); print(open('marker').read())")
    (work_dir / "marker").write_text("found")
    (work_dir / "marker").chmod(0o644)
    monkeypatch.chdir(work_dir if relative == "." else work_dir.parent)
    async with any_bridge.run() as step:
        result = await step.sandbox.commands.run("where", "python3 where.py", cwd=relative)
    assert result.exit_code == 0, result.stderr
    where, marker = result.stdout.split()
    assert (Path(where), marker) == (work_dir, "found")
