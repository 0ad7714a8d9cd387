"""The bubblewrap launcher's refusals and its everyday behaviour, with real bwrap processes."""

from __future__ import annotations

import json
import os
import signal
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from toolbridge import Bridge, SandboxError, ToolOptions
from toolbridge._sandbox.bwrap.launcher import BwrapLauncher
from toolbridge._sandbox.bwrap.user import SANDBOX_GID

MARKER_SCRIPT = "import sys\nopen(sys.argv[1], 'w').write('ran')\n"


async def test_missing_bubblewrap_fails_with_what_to_install_and_runs_nothing(
    journal_path: Path,
    tmp_path: Path,
    work_dir: Path,
    write_script: Callable[[str, str], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_script("mark.py", MARKER_SCRIPT)
    marker = tmp_path / "ran.txt"
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    async with Bridge(journal=journal_path, sandbox="bwrap") as bridge:
        monkeypatch.setenv("PATH", str(empty))
        async with bridge.run("no-bwrap") as step:
            with pytest.raises(SandboxError, match=r"apt-get install -y bubblewrap"):
                await step.sandbox.commands.run("mark", ["python3", "mark.py", str(marker)], cwd=work_dir)
        assert not marker.exists()  # never ran unsandboxed
        monkeypatch.undo()
        # The failure to start is recorded, and entering the run again tries again.
        async with bridge.run("no-bwrap") as step:
            result = await step.sandbox.commands.run(
                "mark", ["python3", "mark.py", "/tmp/mark"], cwd=work_dir
            )
    assert result.exit_code == 0, result.stderr
    assert not result.replayed


async def test_bubblewrap_that_cannot_create_namespaces_fails_with_what_to_change(
    journal_path: Path, tmp_path: Path, work_dir: Path, write_script: Callable[[str, str], Path]
) -> None:
    write_script("mark.py", MARKER_SCRIPT)
    marker = tmp_path / "ran.txt"
    # A stand-in for bwrap on a kernel that refuses unprivileged user namespaces: it says
    # what the real one says there, and fails.
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the kernel "
        "does not allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    async with (
        Bridge(journal=journal_path, sandbox=BwrapLauncher(executable=str(fake))) as bridge,
        bridge.run() as step,
    ):
        with pytest.raises(SandboxError, match="needs unprivileged user namespaces") as caught:
            await step.sandbox.commands.run("mark", ["python3", "mark.py", str(marker)], cwd=work_dir)
    assert "sysctl" in str(caught.value)
    assert not marker.exists()


async def test_a_tcp_bridge_cannot_serve_a_sandbox_without_network(
    journal_path: Path, work_dir: Path
) -> None:
    async with (
        Bridge(journal=journal_path, sandbox="bwrap", listen="127.0.0.1:0") as bridge,
        bridge.run() as step,
    ):
        with pytest.raises(SandboxError, match="has no network"):
            await step.sandbox.commands.run("x", "python3 -c pass", cwd=work_dir)


async def test_the_whole_file_system_is_never_shown(sandboxed: Bridge) -> None:
    async with sandboxed.run() as step:
        with pytest.raises(SandboxError, match="whole file system"):
            await step.sandbox.commands.run("x", "python3 -c pass", cwd="/")


async def test_an_unreadable_working_directory_fails_with_the_fix(sandboxed: Bridge, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only a root daemon runs commands as another uid")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    async with sandboxed.run() as step:
        with pytest.raises(SandboxError, match=r"cannot read the working directory .*\(chmod o\+rx "):
            await step.sandbox.commands.run("x", "python3 -c pass", cwd=private)


async def test_an_unknown_program_fails_to_start(sandboxed: Bridge, work_dir: Path) -> None:
    async with sandboxed.run() as step:
        with pytest.raises(
            SandboxError, match="cannot start 'no-such-program': not found on the sandbox PATH"
        ):
            await step.sandbox.commands.run("x", "no-such-program --flag", cwd=work_dir)


async def test_a_command_killed_by_a_signal_reports_it_like_the_process_launcher(
    sandboxed: Bridge, work_dir: Path
) -> None:
    code = "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)"
    async with sandboxed.run() as step:
        result = await step.sandbox.commands.run("x", ["python3", "-c", code], cwd=work_dir)
        plain_exit = await step.sandbox.commands.run(
            "y", ["python3", "-c", "raise SystemExit(3)"], cwd=work_dir
        )
    assert result.exit_code == -signal.SIGTERM
    assert plain_exit.exit_code == 3


async def test_a_command_over_its_call_budget_is_stopped(
    sandboxed: Bridge, work_dir: Path, write_script: Callable[[str, str], Path]
) -> None:
    write_script(
        "greedy.py",
        """
        import asyncio, time
        from inngest_tools import tools, ToolError
        async def main():
            for _ in range(5):
                try:
                    await tools.ping()
                except ToolError as exc:
                    print(exc.type, flush=True)
            time.sleep(300)
        asyncio.run(main())
        """,
    )
    async with sandboxed.run() as step:
        result = await step.sandbox.commands.run(
            "greedy",
            "python3 greedy.py",
            cwd=work_dir,
            tools={"ping": lambda: "pong"},
            tool_options=ToolOptions(max_calls=2),
            timeout=60,
        )
    assert result.stopped == "max_calls"
    assert "MaxCallsExceeded" in result.stdout


async def test_the_command_socket_is_opened_to_the_sandbox_group_only(
    sandboxed: Bridge, work_dir: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("only a root daemon runs commands as another uid")
    seen: dict[str, os.stat_result] = {}

    async def look(address: str) -> None:  # while the command runs: its own socket
        socket = address.removeprefix("unix:")
        seen["directory"], seen["socket"] = os.stat(os.path.dirname(socket)), os.stat(socket)

    code = (
        "import asyncio, os; from inngest_tools import tools; "
        "asyncio.run(tools.look(os.environ['TOOLBRIDGE_ADDRESS']))"
    )
    async with sandboxed.run() as step:
        command = ["python3", "-c", code]
        result = await step.sandbox.commands.run("x", command, tools={"look": look}, cwd=work_dir)
    assert result.exit_code == 0, result.stderr
    directory, bound = seen["directory"], seen["socket"]
    assert (directory.st_gid, stat.S_IMODE(directory.st_mode)) == (SANDBOX_GID, 0o710)
    assert bound.st_gid == SANDBOX_GID
    assert stat.S_IMODE(bound.st_mode) & 0o062 == 0o060  # the group may connect, others not
    # The bridge's own socket is not lent to sandboxes at all.
    own = os.stat(os.path.dirname(sandboxed.address.removeprefix("unix:")))
    assert stat.S_IMODE(own.st_mode) & 0o077 == 0


async def test_a_snippet_writes_its_result_in_its_own_scratch_directory(sandboxed: Bridge) -> None:
    code = """
import os
open("notes.txt", "w").write("scratch")
return {"cwd_files": sorted(os.listdir(".")), "uid": os.getuid()}
"""
    async with sandboxed.run() as step:
        value = await step.sandbox.python("scratch", code)
    # Its folder is the daemon's scratch directory, lent to the sandbox user and writable.
    assert value["cwd_files"] == ["notes.txt", "snippet.py"]
    if os.geteuid() == 0:
        assert value["uid"] != 0


async def test_node_starts_under_the_default_limits(journal_path: Path, work_dir: Path) -> None:
    async with (
        Bridge(journal=journal_path, sandbox="bwrap") as bridge,
        bridge.run() as step,
    ):
        result = await step.sandbox.commands.run(
            "node",
            ["node", "-e", "console.log(JSON.stringify({ok: true, uid: process.getuid()}))"],
            cwd=work_dir,
        )
    assert result.exit_code == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["ok"] is True
    if os.geteuid() == 0:
        assert seen["uid"] != 0


SEED_AGENT = """
import asyncio
from inngest_tools import tools

async def main():
    customer = await tools.getCustomer("cus_1")
    print(customer["name"], customer["seats"])

asyncio.run(main())
"""


async def test_the_seed_agent_runs_unchanged_under_bubblewrap(
    sandboxed: Bridge, work_dir: Path, write_script: Callable[[str, str], Path]
) -> None:
    write_script("agent.py", SEED_AGENT)
    customers = {"cus_1": {"name": "Acme", "seats": 12}}
    async with sandboxed.run("order-42") as step:
        result = await step.sandbox.commands.run(
            "agent",
            "python agent.py",
            cwd=work_dir,
            tools={"getCustomer": lambda customer_id: customers[customer_id]},
        )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Acme 12\n"


async def test_a_command_never_runs_without_its_limits(
    sandboxed: Bridge,
    tmp_path: Path,
    work_dir: Path,
    write_script: Callable[[str, str], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_script("mark.py", MARKER_SCRIPT)
    marker = tmp_path / "ran.txt"

    def refuse(pid: int, kind: int, limits: tuple[int, int]) -> tuple[int, int]:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr("toolbridge._sandbox.bwrap.launcher.resource.prlimit", refuse)
    async with sandboxed.run() as step:
        with pytest.raises(SandboxError, match="could not apply the sandbox's limits"):
            await step.sandbox.commands.run("mark", ["python3", "mark.py", str(marker)], cwd=work_dir)
    assert not marker.exists()
