"""Sandboxed code tries to outlive its command, and to hold privileges it should not have."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from toolbridge import Bridge
from toolbridge._sandbox.bwrap.user import SANDBOX_GID, SANDBOX_UIDS

# The grandchild writes to the pipe once it runs the marked program, so the command exits
# only when the escapee is certainly alive.
DOUBLE_FORK = """
import os, sys
marker = sys.argv[1]
read_end, write_end = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.set_inheritable(write_end, True)
        os.execvp("python3", ["python3", "-c",
            "import os, sys, time; os.write(int(sys.argv[1]), b'x'); time.sleep(300)",
            str(write_end), marker])
    os._exit(0)
os.close(write_end)
assert os.read(read_end, 1) == b"x"
print("escapee started")
"""


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline.split(b"\0"):
            found.append(int(entry))
    return found


@pytest.fixture
def marker() -> Iterator[str]:
    value = "escapee-" + secrets.token_hex(8)
    yield value
    for pid in _processes_with(value):  # the control's escapee
        os.kill(pid, signal.SIGKILL)


async def test_a_double_forked_child_does_not_outlive_its_command(
    sandboxed: Bridge,
    unsandboxed: Bridge,
    work_dir: Path,
    write_script: Callable[[str, str], Path],
    marker: str,
) -> None:
    write_script("escape.py", DOUBLE_FORK)

    async with unsandboxed.run("control") as step:
        control = await step.sandbox.commands.run("escape", ["python3", "escape.py", marker], cwd=work_dir)
    assert control.stdout == "escapee started\n"
    assert len(_processes_with(marker)) == 1  # the process launcher let it escape
    for pid in _processes_with(marker):
        os.kill(pid, signal.SIGKILL)

    async with sandboxed.run("sandboxed") as step:
        result = await step.sandbox.commands.run("escape", ["python3", "escape.py", marker], cwd=work_dir)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "escapee started\n"
    # Its pid namespace ended with the command, and every process in it with it.
    assert _processes_with(marker) == []


async def test_a_command_over_its_timeout_is_killed_with_its_whole_tree(
    sandboxed: Bridge, work_dir: Path, write_script: Callable[[str, str], Path], marker: str
) -> None:
    write_script(
        "linger.py",
        DOUBLE_FORK + "import time\ntime.sleep(300)\n",
    )
    async with sandboxed.run("timeout") as step:
        result = await step.sandbox.commands.run(
            "linger", ["python3", "linger.py", marker], cwd=work_dir, timeout=3
        )
    assert result.stopped == "timeout"
    assert result.stdout == "escapee started\n"
    assert _processes_with(marker) == []


IDENTITY = """
import json, os, subprocess
lines = open("/proc/self/status").read().splitlines()
status = dict(line.split(":\\t", 1) for line in lines if ":\\t" in line)
userns = subprocess.run(["unshare", "--user", "true"], capture_output=True, text=True)
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
    "cap_eff": status["CapEff"].strip(), "cap_prm": status["CapPrm"].strip(),
    "cap_bnd": status["CapBnd"].strip(), "no_new_privs": status["NoNewPrivs"].strip(),
    "userns_error": userns.stderr.strip(), "userns_status": userns.returncode,
    "pid": os.getpid(), "hostname": os.uname().nodename, "sid_is_own": os.getsid(0) == os.getpid(),
}))
"""


async def test_the_command_runs_unprivileged_in_its_own_namespaces(
    sandboxed: Bridge, work_dir: Path, write_script: Callable[[str, str], Path]
) -> None:
    write_script("identity.py", IDENTITY)
    async with sandboxed.run("identity") as step:
        result = await step.sandbox.commands.run("identity", "python3 identity.py", cwd=work_dir)
    assert result.exit_code == 0, result.stderr
    seen = json.loads(result.stdout)
    if os.geteuid() == 0:
        assert seen["uid"] in SANDBOX_UIDS
        assert seen["gid"] == SANDBOX_GID
    else:
        assert seen["uid"] == os.getuid()
    assert seen["groups"] in ([], [seen["gid"]])  # none of the daemon's groups
    assert seen["cap_eff"] == seen["cap_prm"] == "0000000000000000"
    assert seen["no_new_privs"] == "1"
    assert seen["userns_status"] != 0  # no further user namespaces
    assert "No space left on device" in seen["userns_error"]  # max_user_namespaces = 0
    assert seen["pid"] < 10  # its own pid namespace, where bwrap's init is pid 1
    assert seen["hostname"] == "sandbox"


async def test_concurrent_commands_run_as_different_users(
    sandboxed: Bridge, work_dir: Path, write_script: Callable[[str, str], Path]
) -> None:
    if os.geteuid() != 0:
        pytest.skip("only a root daemon gives each command its own uid")
    write_script("uid.py", "import os\nprint(os.getuid())\n")
    async with sandboxed.run("uids") as step:
        results = await asyncio.gather(
            *(step.sandbox.commands.run(f"uid{i}", "python3 uid.py", cwd=work_dir) for i in range(4))
        )
    uids = {int(result.stdout) for result in results}
    assert len(uids) == 4
    assert uids <= set(SANDBOX_UIDS)
