"""Seed 001 (AgentKit ``createTool``), written as its users write it, under both launchers.

``createTool({name, description, parameters, handler, lifecycle})`` is ``tool.step(name=,
description=, input=, run=, lifecycle=)``; the handler's ``{ agent, network }`` is ``ctx``
(``ctx.agent``, ``ctx.network.state``); the sandbox calls ``tools["write-file"](...)``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from toolbridge import Bridge, ToolContext, tool, tool_definitions

LAUNCHERS = ["process", pytest.param("bwrap", marks=pytest.mark.bwrap)]
TOOLBRIDGE = Path(sys.executable).with_name("toolbridge")


@pytest.fixture(params=LAUNCHERS)
async def bridge(request: pytest.FixtureRequest, journal_path: Path) -> AsyncIterator[Bridge]:
    async with Bridge(journal=journal_path, sandbox=request.param) as opened:
        yield opened


def make_write_file(disk: Path, log: list[Any]) -> Any:
    async def handler(
        args: dict[str, str], ctx: ToolContext
    ) -> dict[str, bool]:  # ({ path, contents }, { agent, network })
        path, contents = args["path"], args["contents"]
        (disk / path).write_text(contents)  # await fs.writeFile(path, contents)
        ctx.network.state["fileWritten"] = True
        assert ctx.agent is None  # no agent called it: a sandbox did
        return {"success": True}

    def on_start(event: dict[str, Any]) -> Any:  # onStart: ({ parameters }) => parameters
        log.append(("onStart", event["parameters"]))
        return event["parameters"]

    def on_finish(event: dict[str, Any]) -> Any:  # onFinish: ({ result }) => result
        log.append(("onFinish", event["result"]))
        return event["result"]

    return tool.step(
        name="write-file",
        description="Write a file to disk with the given contents",
        input={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The path to write the file to"},
                "contents": {"type": "string", "description": "The contents to write to the file"},
            },
            "required": ["path", "contents"],
        },
        run=handler,
        lifecycle={"on_start": on_start, "on_finish": on_finish},
    )


file_written = tool.step(
    name="file-written",
    description="Whether a tool of this run wrote a file",
    run=lambda args, ctx: bool(ctx.network.state.get("fileWritten")),
)

AGENT_PY = """
import asyncio
from inngest_tools import tools

async def main():
    print(await tools["file-written"]())
    print(await tools["write-file"](path="out.txt", contents="hello"))
    print(await tools["file-written"]())

asyncio.run(main())
"""

AGENT_JS = """
const { tools } = require("inngest_tools");

async function main() {
  console.log(await tools["write-file"]({ path: "out.js.txt", contents: "from node" }));
  console.log(await tools["file-written"]());
}

main();
"""


async def test_write_file_as_agentkit_writes_it_in_python_and_node(
    bridge: Bridge, tmp_path: Path, journal_path: Path
) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    work = tmp_path / "work"
    work.mkdir(mode=0o755)
    work.chmod(0o755)
    for name, text in (("agent.py", AGENT_PY), ("agent.js", AGENT_JS)):
        (work / name).write_text(text)
        (work / name).chmod(0o644)
    log: list[Any] = []
    tools = [make_write_file(disk, log), file_written]  # named tools, as AgentKit's list
    async with bridge.run("seed-001") as step:
        py = await step.sandbox.commands.run("py", "python agent.py", tools=tools, cwd=work)
        assert step.state["fileWritten"] is True  # network.state, read by the host
        step.state["fileWritten"] = False
        node = await step.sandbox.commands.run("node", "node agent.js", tools=tools, cwd=work)
        assert step.state["fileWritten"] is True
    assert (py.exit_code, py.stdout) == (0, "False\n{'success': True}\nTrue\n"), py.stderr
    assert (node.exit_code, node.stdout) == (0, "{ success: true }\ntrue\n"), node.stderr
    assert (disk / "out.txt").read_text() == "hello"
    assert (disk / "out.js.txt").read_text() == "from node"
    assert log[:2] == [
        ("onStart", {"path": "out.txt", "contents": "hello"}),
        ("onFinish", {"success": True}),
    ]
    # Replayed: the state as it was after each command, and nothing written again.
    (disk / "out.txt").unlink()
    async with bridge.run("seed-001") as step:
        await step.sandbox.commands.run("py", "python agent.py", tools=tools, cwd=work)
        assert step.state["fileWritten"] is True
        step.state["fileWritten"] = False
        await step.sandbox.commands.run("node", "node agent.js", tools=tools, cwd=work)
        assert step.state["fileWritten"] is True
    assert not (disk / "out.txt").exists()
    # The name as given, in the trace and the definitions.
    shown = await asyncio.create_subprocess_exec(
        TOOLBRIDGE, "trace", "seed-001", "--journal", str(journal_path), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(shown.communicate(), 60)
    trace = out.decode()
    assert "write-file  tool  completed" in trace
    assert "state: fileWritten=true" in trace
    assert [d["name"] for d in tool_definitions(tools)] == ["file-written", "write-file"]


async def test_strict_false_and_a_lifecycle_that_refuses(bridge: Bridge) -> None:
    def refuse_outside_tmp(event: dict[str, Any]) -> Any:
        if not event["parameters"]["path"].startswith("tmp/"):
            raise ValueError("only tmp/ may be written")  # onStart: throwing prevents the call
        return event["parameters"]

    lax = tool.step(
        name="write-file",
        input={"type": "object", "properties": {"path": {"type": "string"}, "size": {"type": "integer"}}},
        run=lambda args, ctx: args,
        strict=False,
        lifecycle={"on_start": refuse_outside_tmp},
    )
    code = (
        'ok = await tools["write-file"](path="tmp/a", size="2", extra=1)\n'
        "try:\n"
        '    await tools["write-file"](path="/etc/passwd")\n'
        "except ToolError as e:\n"
        "    return [ok, e.type]"
    )
    async with bridge.run("seed-001-strict") as step:
        result = await step.sandbox.python("strict", code, tools=[lax])
    assert result == [{"path": "tmp/a", "size": 2, "extra": 1}, "Refused"]


async def test_the_cli_calls_and_lists_a_hyphenated_tool_by_its_name(tmp_path: Path) -> None:
    (tmp_path / "worker.py").write_text(
        "from toolbridge import Bridge, tool\n"
        "write_file = tool.step(name='write-file', run=lambda args, ctx: {'success': True, **args})\n"
        f"bridge = Bridge(journal={str(tmp_path / 'w.db')!r}, tools=[write_file])\n"
    )

    async def cli(*args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            TOOLBRIDGE, *args, cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err.decode()
        return out.decode()

    called = await cli("call", "worker:bridge", "write-file", "--input", '{"path": "a"}', "--run-id", "cli-1")
    assert json.loads(called) == {"success": True, "path": "a"}
    listed = await cli("definitions", "worker:bridge")
    assert [definition["name"] for definition in json.loads(listed)] == ["write-file"]
    traced = await cli("trace", "cli-1", "--journal", str(tmp_path / "w.db"))
    assert "write-file  tool  completed" in traced
