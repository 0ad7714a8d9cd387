"""Sandboxed code tries to write outside its work directory, and to trick the daemon into
reading host files for it."""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from toolbridge import Bridge, SnippetError

WRITE_PROBE = """
import errno, json, os, sys
out = {}
for path in sys.argv[1:]:
    try:
        with open(path, "w") as handle:
            handle.write("written by the sandbox")
        out[path] = "written"
    except OSError as exc:
        out[path] = errno.errorcode.get(exc.errno, str(exc))
print(json.dumps(out))
"""


async def test_writes_outside_the_work_directory_fail(
    sandboxed: Bridge, tmp_path: Path, work_dir: Path, write_script: Callable[[str, str], Path]
) -> None:
    write_script("probe.py", WRITE_PROBE)
    write_script("agent.py", "print('the original')\n")
    interpreter_bin = Path(sys.base_prefix) / "bin"  # bound read-only for the interpreter
    targets = {
        "work_dir": str(work_dir / "new.txt"),
        "script": str(work_dir / "agent.py"),
        "host_tmp_sibling": str(tmp_path / "escaped.txt"),
        "host_checkout": str(Path(__file__).parent / "escaped.txt"),
        "root": "/escaped.txt",
        "usr": "/usr/escaped.txt",
        "etc": "/etc/escaped.txt",
        "interpreter": str(interpreter_bin / "escaped.txt"),
        "private_tmp": "/tmp/scratch.txt",
    }
    async with sandboxed.run("writes") as step:
        result = await step.sandbox.commands.run(
            "probe", ["python3", "probe.py", *targets.values()], cwd=work_dir
        )
    assert result.exit_code == 0, result.stderr
    seen = {label: json.loads(result.stdout)[path] for label, path in targets.items()}
    # The command's folder and everything the interpreter needs are read-only;
    # the sandbox's own root too; only its private /tmp takes writes.
    assert seen == {
        "work_dir": "EROFS",
        "script": "EROFS",
        # Under /tmp the path exists only in the sandbox's private /tmp: written there.
        "host_tmp_sibling": "written",
        "host_checkout": "ENOENT",  # not mounted: its folder does not exist in there
        "root": "EROFS",
        "usr": "EROFS",
        "etc": "EROFS",
        "interpreter": "EROFS",
        "private_tmp": "written",
    }
    assert (work_dir / "agent.py").read_text() == "print('the original')\n"
    # Nothing landed on the host (its /tmp was private too).
    escaped = [work_dir / "new.txt", tmp_path / "escaped.txt", Path(__file__).parent / "escaped.txt"]
    assert _existing(*escaped) == []
    assert _existing(Path("/tmp/scratch.txt")) == []


def _existing(*paths: Path) -> list[Path]:
    return [path for path in paths if path.exists()]


async def test_snippet_cannot_make_the_daemon_read_a_host_file(sandboxed: Bridge, tmp_path: Path) -> None:
    canary = tmp_path / "host-credentials.json"
    canary.write_text(json.dumps({"api_key": secrets.token_hex(16)}))
    code = f"""
import os
os.symlink({str(canary)!r}, os.environ["TOOLBRIDGE_RESULT_PATH"])
raise SystemExit(0)
"""
    async with sandboxed.run("symlink") as step:
        with pytest.raises(SnippetError, match="left no result") as caught:
            await step.sandbox.python("steal", code)
    assert "api_key" not in str(caught.value)


async def test_snippet_result_fifo_does_not_block_the_daemon(sandboxed: Bridge) -> None:
    code = """
import os
os.mkfifo(os.environ["TOOLBRIDGE_RESULT_PATH"])
raise SystemExit(0)
"""
    async with sandboxed.run("fifo") as step:
        with pytest.raises(SnippetError, match="left no result"):
            await step.sandbox.python("block", code)
