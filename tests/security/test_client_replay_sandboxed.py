"""Client-side replay under each launcher and in both clients: the records reach the sandbox.

Under bubblewrap the command sees only what is bound into its view, and runs as a user of its
own: the records file must be readable there, and ``taken/`` writable, or every recorded call
would go back to the daemon. The re-run here has a token the daemon refuses, so each recorded
answer it prints came from its records, taken in the sandbox.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import pytest

from tests.helpers import WAIT
from toolbridge import Bridge, ToolError

PYTHON_AGENT = """
import asyncio, json, os
from inngest_tools import tools, ToolError

async def call(name, *args):
    try:
        return {"value": await getattr(tools, name)(*args)}
    except ToolError as error:
        return {"error": error.type, "message": error.message}

async def main():
    answers = [await call(name, *args) for name, args in json.loads(os.environ["PLAN"])]
    print(json.dumps(answers), flush=True)
    if os.environ["ENTRY"] == "1":
        await tools.block()

asyncio.run(main())
"""

NODE_AGENT = """
const { tools } = require("inngest_tools");
async function call(name, ...args) {
  try {
    return { value: await tools[name](...args) };
  } catch (error) {
    return { error: error.type, message: error.message };
  }
}
(async () => {
  const answers = [];
  for (const [name, args] of JSON.parse(process.env.PLAN)) answers.push(await call(name, ...args));
  console.log(JSON.stringify(answers));
  if (process.env.ENTRY === "1") await tools.block();
  process.exit(0);
})();
"""

AGENTS = {
    "python": ("agent.py", PYTHON_AGENT, "python3 agent.py"),
    "node": ("agent.js", NODE_AGENT, "node agent.js"),
}
FIRST = [["add", [1, 2]], ["fail", ["no"]], ["add", [1, 2]]]


@pytest.mark.parametrize("sandbox", ["process", "bwrap"])
@pytest.mark.parametrize("language", ["python", "node"])
async def test_a_rerun_answers_its_recorded_calls_in_the_sandbox(
    journal_path: Path, work_dir: Path, sandbox: Literal["process", "bwrap"], language: str
) -> None:
    filename, source, command = AGENTS[language]
    (work_dir / filename).write_text(source)
    invoked: Counter[str] = Counter()
    blocked = asyncio.Event()

    def add(a: int, b: int) -> int:
        invoked["add"] += 1
        return a + b + invoked["add"] * 100  # each invocation its own answer

    def fail(reason: str) -> None:
        invoked["fail"] += 1
        raise ToolError(reason, type="Refused")

    async def block() -> None:
        blocked.set()
        await asyncio.Event().wait()

    tools = {"add": add, "fail": fail, "block": block, "fresh": lambda: 0}

    async def enter(entry: int, plan: list[Any], **env: str) -> Any:
        async with Bridge(journal=journal_path, sandbox=sandbox) as bridge, bridge.run("r") as step:
            return await step.sandbox.commands.run(
                "agent",
                command,
                tools=tools,
                cwd=work_dir,
                env={"ENTRY": str(entry), "PLAN": json.dumps(plan), **env},
            )

    first = asyncio.create_task(enter(1, FIRST))
    await asyncio.wait_for(blocked.wait(), WAIT)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    result = await enter(2, [*FIRST, ["fresh", []]], TOOLBRIDGE_TOKEN="tb1.not.this-commands")
    assert result.exit_code == 0, result.stderr
    answers = json.loads(result.stdout)
    assert answers[:3] == [{"value": 103}, {"error": "Refused", "message": "no"}, {"value": 203}]
    assert answers[3]["error"] == "Unauthenticated"  # not recorded: the daemon refuses the token
    assert invoked == {"add": 2, "fail": 1}  # nothing recorded ran again
