"""``tool.shim``: a program on the command's PATH that asks the host, under both launchers.

Real sandboxed Python and Node commands run the shimmed program; the handler replies, runs a
real program on the host (stdin in, output streamed back as it comes) or refuses; each run
is a journaled step (no injected environment in the journal) counted against max_calls.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from toolbridge import Bridge, ShimCall, ToolOptions, tool
from toolbridge._journal.sqlite import SQLiteJournal
from toolbridge._records import StepRecord
from toolbridge._sandbox.bwrap.launcher import BwrapLauncher

from ..security.conftest import _REASON as BWRAP_MISSING
from ..security.conftest import TEST_LIMITS

CREDENTIAL = "s3cr3t-credential-value"

# A git-like program on the host: reads stdin, says what it got, waits until the sandbox has
# seen its first line (proof that the output is streamed, not sent at the end), then ends.
HOST_PROGRAM = textwrap.dedent(
    """
    import os, sys, time, pathlib
    data = sys.stdin.buffer.read()
    print("first: got", len(data), "bytes", flush=True)
    flag = pathlib.Path(sys.argv[1])
    for _ in range(2000):
        if flag.exists():
            break
        time.sleep(0.005)
    else:
        sys.exit(9)
    print("second: token", "present" if os.environ.get("GIT_TOKEN") == sys.argv[2] else "missing")
    sys.stderr.write("remote: done\\n")
    sys.exit(3)
    """
)

AGENT = """
import asyncio, json, subprocess
from inngest_tools import tools

async def main():
    process = subprocess.Popen(["gitlike", "push", "origin", "main"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdin.write(b"x" * 300000)
    process.stdin.close()
    first = process.stdout.readline().decode()
    await tools.sawFirst()
    rest = process.stdout.read().decode()
    err = process.stderr.read().decode()
    code = process.wait()
    said = subprocess.run(["hello", "a b"], capture_output=True, text=True)
    refused = subprocess.run(["hello", "--force"], capture_output=True, text=True)
    print(json.dumps({"first": first, "rest": rest, "err": err, "code": code,
                      "said": [said.stdout, said.returncode],
                      "refused": [refused.stderr, refused.returncode]}))

asyncio.run(main())
"""

NODE_AGENT = """
const { spawnSync } = require("node:child_process");
const said = spawnSync("hello", ["from node"], { input: "node stdin", encoding: "utf8" });
console.log(JSON.stringify({ out: said.stdout, code: said.status }));
"""


@pytest.fixture(params=["process", "bwrap"])
async def bridge_any(request: pytest.FixtureRequest, journal_path: Path) -> AsyncIterator[Bridge]:
    if request.param == "bwrap" and BWRAP_MISSING is not None:
        pytest.skip(BWRAP_MISSING)
    sandbox: Any = BwrapLauncher(limits=TEST_LIMITS) if request.param == "bwrap" else "process"
    async with Bridge(journal=journal_path, sandbox=sandbox) as opened:
        yield opened


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir(mode=0o755)
    path.chmod(0o755)
    return path


async def steps_of(journal_path: Path, run_id: str) -> list[StepRecord]:
    journal = SQLiteJournal(journal_path)
    await journal.open()
    try:
        return await journal.load_steps(run_id)
    finally:
        await journal.close()


def shims(tmp_path: Path) -> dict[str, Any]:
    flag = tmp_path / "saw-first"
    host_program = tmp_path / "host_git.py"
    host_program.write_text(HOST_PROGRAM)

    def gitlike(call: ShimCall) -> object:
        env = {"GIT_TOKEN": CREDENTIAL, "PATH": "/usr/bin:/bin"}
        return call.run([sys.executable, str(host_program), str(flag), CREDENTIAL], env=env)

    def hello(call: ShimCall) -> object:
        if "--force" in call.argv:
            return call.refuse("--force is not allowed here", exit_code=5)
        return call.reply(stdout=f"hello {call.argv} {call.stdin.decode()} {call.env.get('GREETING')}\n")

    async def saw_first() -> str:
        flag.write_text("yes")
        return "ok"

    return {
        "gitlike": tool.shim("gitlike", gitlike),
        "hello": tool.shim("hello", hello, env=["GREETING"]),
        "sawFirst": saw_first,
    }


async def test_python_command_runs_shims_streams_and_journals(
    bridge_any: Bridge, work_dir: Path, tmp_path: Path, journal_path: Path
) -> None:
    (work_dir / "agent.py").write_text(textwrap.dedent(AGENT))
    async with bridge_any.run("shims") as step:
        result = await step.sandbox.commands.run(
            "agent",
            ["python3", "agent.py"],
            tools=shims(tmp_path),
            cwd=work_dir,
            env={"GREETING": "hi", "OTHER": "not sent"},
            timeout=60,
        )
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["first"] == "first: got 300000 bytes\n"
    assert out["rest"] == "second: token present\n"
    assert out["err"] == "remote: done\n"
    assert out["code"] == 3
    assert out["said"] == ["hello ('a b',)  hi\n", 0]
    assert out["refused"] == ["hello: --force is not allowed here\n", 5]
    steps = {s.name: s for s in await steps_of(journal_path, "shims") if s.kind == "tool"}
    git = steps["gitlike"]
    assert git.status == "completed"
    recorded = json.loads(git.input_json or "{}")
    assert recorded["argv"] == ["push", "origin", "main"]
    assert recorded["cwd"] == "."
    assert recorded["stdin"]["size"] == 300000
    output = json.loads(git.output_json or "{}")
    assert output["exit_code"] == 3
    assert output["stdout"]["size"] == len("first: got 300000 bytes\nsecond: token present\n")
    assert json.loads(steps["hello"].input_json or "{}")["env"] == {"GREETING": "hi"}
    assert CREDENTIAL.encode() not in journal_path.read_bytes()


async def test_node_command_runs_a_shim(bridge_any: Bridge, work_dir: Path, tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    (work_dir / "agent.js").write_text(NODE_AGENT)
    async with bridge_any.run("node-shim") as step:
        result = await step.sandbox.commands.run(
            "agent", ["node", "agent.js"], tools=shims(tmp_path), cwd=work_dir, timeout=60
        )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {"out": "hello ('from node',) node stdin None\n", "code": 0}


async def test_snippets_run_shims(bridge_any: Bridge, tmp_path: Path) -> None:
    code = 'import subprocess\nreturn subprocess.run(["hello", "x"], capture_output=True, text=True).stdout'
    async with bridge_any.run("snippet-shim") as step:
        said = await step.sandbox.python("py", code, tools=shims(tmp_path), output=str)
        if shutil.which("node") is not None:
            js = 'const cp = require("node:child_process");\n'
            js += 'return cp.execFileSync("hello", ["y"], {encoding: "utf8"});'
            assert await step.sandbox.typescript("ts", js, tools=shims(tmp_path), output=str) == (
                "hello ('y',)  None\n"
            )
    assert said == "hello ('x',)  None\n"


async def test_shim_runs_count_against_max_calls(bridge_any: Bridge, work_dir: Path, tmp_path: Path) -> None:
    agent = textwrap.dedent(
        """
        import subprocess
        for i in range(3):
            r = subprocess.run(['hello', str(i)], capture_output=True, text=True)
            print(r.returncode, r.stderr.strip())
        """
    )
    (work_dir / "agent.py").write_text(agent)
    async with bridge_any.run("budget") as step:
        result = await step.sandbox.commands.run(
            "agent",
            ["python3", "agent.py"],
            tools=shims(tmp_path),
            cwd=work_dir,
            tool_options=ToolOptions(max_calls=2),
            timeout=60,
        )
    lines = [line.strip() for line in result.stdout.splitlines()]
    assert lines[:2] == ["0", "0"]
    assert result.stopped == "max_calls"
    assert any("more than 2 tool calls" in line for line in [*lines, result.stderr])


def test_shim_declarations_are_checked() -> None:
    with pytest.raises(ValueError, match="program name"):
        tool.shim("bad name", lambda call: call.reply())
    with pytest.raises(ValueError, match="variable name"):
        tool.shim("gh", lambda call: call.reply(), env=["GH-TOKEN"])
    with pytest.raises(TypeError):
        tool.shim("gh", "not a function")  # type: ignore[arg-type]


async def test_a_shim_called_as_a_tool_is_refused(bridge_any: Bridge, work_dir: Path, tmp_path: Path) -> None:
    agent = textwrap.dedent(
        """
        import asyncio
        from inngest_tools import tools, ToolError
        from inngest_tools import definitions
        async def main():
            print(sorted(d["name"] for d in await definitions()))
            try:
                await tools.hello(argv=[], cwd='.', env={}, stdin={'size': 0, 'sha256': ''})
            except ToolError as e:
                print(e.type)
        asyncio.run(main())
        """
    )
    (work_dir / "agent.py").write_text(agent)
    async with bridge_any.run("as-tool") as step:
        result = await step.sandbox.commands.run(
            "agent", ["python3", "agent.py"], tools=shims(tmp_path), cwd=work_dir, timeout=60
        )
    assert result.stdout.split("\n")[:2] == ["['sawFirst']", "ShimOnly"], result.stderr


async def test_a_shim_requiring_confirmation_waits_for_a_person(
    bridge_any: Bridge, work_dir: Path, tmp_path: Path
) -> None:
    ran: list[tuple[str, ...]] = []

    def deploy(call: ShimCall) -> object:
        ran.append(call.argv)
        return call.reply(stdout="deployed\n")

    (work_dir / "agent.py").write_text(
        "import subprocess\n"
        "print(subprocess.run(['deploy', 'prod'], capture_output=True, text=True).stdout)\n"
    )
    async with bridge_any.run("confirm") as step:
        command = asyncio.ensure_future(
            step.sandbox.commands.run(
                "agent",
                ["python3", "agent.py"],
                tools={"deploy": tool.shim("deploy", deploy, requires_confirmation=True)},
                cwd=work_dir,
                timeout=60,
            )
        )
        async with asyncio.timeout(60):
            while not (waiting := await bridge_any.approvals.list()):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        assert ran == []
        (request,) = waiting
        assert request.tool == "deploy"
        await bridge_any.approvals.approve(request.id, by="alice")
        result = await command
    assert result.stdout.strip() == "deployed"
    assert ran == [("prod",)]


async def test_output_larger_than_a_reply_is_streamed_not_refused(
    bridge_any: Bridge, work_dir: Path, journal_path: Path
) -> None:
    big = b"0123456789abcdef" * (3 * 1024 * 1024 // 16)  # 3 MiB: thrice the reply limit

    def dump(call: ShimCall) -> object:
        return call.reply(stdout=big)

    (work_dir / "agent.py").write_text(
        "import hashlib, subprocess\n"
        "out = subprocess.run(['dump'], capture_output=True).stdout\n"
        "print(len(out), hashlib.sha256(out).hexdigest())\n"
    )
    async with bridge_any.run("big") as step:
        result = await step.sandbox.commands.run(
            "agent",
            ["python3", "agent.py"],
            tools={"dump": tool.shim("dump", dump)},
            cwd=work_dir,
            timeout=60,
        )
    digest = hashlib.sha256(big).hexdigest()
    assert result.stdout.split() == [str(len(big)), digest], result.stderr
    (recorded,) = [s for s in await steps_of(journal_path, "big") if s.kind == "tool"]
    output = json.loads(recorded.output_json or "{}")
    assert output["stdout"] == {"size": len(big), "sha256": digest}
    assert "replay" not in output  # too large to keep: its digest is
