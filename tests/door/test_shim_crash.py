"""A host killed with SIGKILL while a shimmed ``run(...)`` runs: the step stays interrupted
(``running``, never ``completed``), the program on the host dies with it, and a replay does
not run it again (a shim is at-most-once unless it asks for attempts). The same kill during
a proxied request leaves its egress step interrupted too."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

from toolbridge import Bridge, RunBusyError, ShimCall, tool
from toolbridge._journal.sqlite import SQLiteJournal
from toolbridge._records import StepRecord

from .remote import WorldCA, remotes

WAIT = 60.0

HOST = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from toolbridge import Bridge, tool

    journal, work, program = sys.argv[1], Path(sys.argv[2]), sys.argv[3]

    def push(call):
        return call.run([sys.executable, program, str(work / "started")])

    def hello(call):
        with (work / "hello-calls").open("a") as handle:
            handle.write("called\\n")
        return call.reply(stdout="hello from the first host\\n")

    async def main():
        async with Bridge(journal=journal, run_lease=1.0) as bridge:  # a dead holder's run is free soon
            async with bridge.run("crash") as step:
                await step.sandbox.commands.run(
                    "agent",
                    ["python3", "agent.py"],
                    cwd=work,
                    tools={"push": tool.shim("gitpush", push), "hello": tool.shim("hello", hello)},
                )

    asyncio.run(main())
    """
)

# The program the handler runs on the host: says it started (its pid), then never ends.
PROGRAM = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    marker = Path(sys.argv[1])
    with marker.open("a") as handle:
        handle.write(f"{os.getpid()}\\n")
    while True:
        time.sleep(60)
    """
)

AGENT = textwrap.dedent(
    """
    import subprocess
    print(subprocess.run(["hello"], capture_output=True, text=True).stdout, end="")
    r = subprocess.run(["gitpush"], capture_output=True, text=True)
    print(r.returncode, r.stderr.strip())
    """
)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}/stat").exists() else "X"
    return status != "Z"


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait for ``condition`` (another process's doing: nothing announces it, so look again)."""
    async with asyncio.timeout(WAIT):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def test_sigkill_during_a_shimmed_run_leaves_the_step_interrupted(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "agent.py").write_text(AGENT)
    (tmp_path / "host.py").write_text(HOST)
    (tmp_path / "program.py").write_text(PROGRAM)
    journal_path = tmp_path / "journal.db"
    marker = work / "started"
    host = await asyncio.create_subprocess_exec(
        sys.executable, str(tmp_path / "host.py"), str(journal_path), str(work), str(tmp_path / "program.py")
    )
    try:
        await until(lambda: marker.exists() and marker.read_text().endswith("\n"), "the program to start")
    finally:
        host.send_signal(signal.SIGKILL)
        await host.wait()
    (program_pid,) = [int(line) for line in marker.read_text().split()]
    await until(lambda: not alive(program_pid), "the program to die with the host")

    journal = SQLiteJournal(journal_path)
    await journal.open()
    try:
        steps = {s.name: s for s in await journal.load_steps("crash") if s.kind == "tool"}
    finally:
        await journal.close()
    assert steps["hello"].status == "completed"
    shim_step = steps["push"]
    assert shim_step.status == "running"  # interrupted: no outcome was recorded
    assert json.loads(shim_step.input_json or "{}")["argv"] == []

    def push(call: ShimCall) -> object:
        return call.run([sys.executable, str(tmp_path / "program.py"), str(marker)])

    def hello(call: ShimCall) -> object:
        raise AssertionError("a completed run is answered from the journal, not run again")

    shims = {"push": tool.shim("gitpush", push), "hello": tool.shim("hello", hello)}

    async with Bridge(journal=journal_path) as bridge:
        async with asyncio.timeout(WAIT):
            while True:  # the dead host's lease runs out within a second
                try:
                    async with bridge.run("crash") as step:
                        result = await step.sandbox.commands.run(
                            "agent",
                            ["python3", "agent.py"],
                            cwd=work,
                            tools=shims,
                        )
                    break
                except RunBusyError:
                    await asyncio.sleep(0.1)
    replayed, last = result.stdout.splitlines()
    assert replayed == "hello from the first host"
    assert (work / "hello-calls").read_text() == "called\n"
    code, _, message = last.partition(" ")
    assert code == "1"
    assert "interrupted" in message
    assert marker.read_text().split() == [str(program_pid)]  # it was not run again


EGRESS_HOST = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from toolbridge import Bridge, Egress

    journal, work, port, ca = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    AGENT = f"import urllib.request\\nurllib.request.urlopen('https://localhost:{port}/hang', timeout=600)\\n"

    async def main():
        async with Bridge(journal=journal, sandbox="process") as bridge, bridge.run("crash") as step:
            egress = Egress(allow=[f"localhost:{port}"], upstream_ca=ca)
            await step.sandbox.commands.run("agent", ["python3", "-c", AGENT], cwd=work, egress=egress)

    asyncio.run(main())
    """
)


async def egress_steps(journal_path: Path) -> list[StepRecord]:
    journal = SQLiteJournal(journal_path)
    await journal.open()
    try:
        return [s for s in await journal.load_steps("crash") if s.kind == "egress"]
    finally:
        await journal.close()


async def test_sigkill_during_a_proxied_request_leaves_the_step_interrupted(tmp_path: Path) -> None:
    ca = WorldCA(tmp_path)
    (tmp_path / "host.py").write_text(EGRESS_HOST)
    journal_path = tmp_path / "journal.db"
    async with remotes(ca, "unused", 1) as (server,):
        host = await asyncio.create_subprocess_exec(
            sys.executable,
            str(tmp_path / "host.py"),
            str(journal_path),
            str(tmp_path),
            str(server.port),
            str(ca.path),
        )
        try:
            await asyncio.wait_for(server.hanging.wait(), WAIT)
            async with asyncio.timeout(WAIT):
                while not await egress_steps(journal_path):  # noqa: ASYNC110  (the start record)
                    await asyncio.sleep(0.05)
        finally:
            host.send_signal(signal.SIGKILL)
            await host.wait()
    (step,) = await egress_steps(journal_path)
    assert step.status == "running"  # interrupted: never recorded as completed
    assert json.loads(step.input_json or "{}")["url"] == f"https://localhost:{server.port}/hang"
