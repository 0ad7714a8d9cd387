"""A call refused for the in-flight limit is ``TooManyCalls`` (retryable) in both real clients.

``RESOURCE_EXHAUSTED`` also means a call too large (``RequestTooLarge``, final); the daemon's
message names the limit, and each client tells the two apart by it. With ``max_in_flight=1``
a held ``block`` call takes the only slot; the script probes until a probe is refused, leaves
a file saying so (the test then releases ``block``), and retries until the probe is answered.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from tests.helpers import wait_until
from toolbridge import Bridge, ToolOptions

PYTHON = """
import asyncio, json
from inngest_tools import tools, ToolError

async def until_answered(name):
    while True:
        try:
            return await tools[name]()
        except ToolError as exc:
            if exc.type != "TooManyCalls":
                raise
            await asyncio.sleep(0.01)

async def main():
    blocked = asyncio.ensure_future(until_answered("block"))
    while True:
        try:
            await tools.probe()
        except ToolError as exc:
            refused = {"type": exc.type, "retryable": exc.retryable, "message": exc.message}
            break
        await asyncio.sleep(0.01)
    open("refused", "w").close()
    print(json.dumps({"refused": refused, "blocked": await blocked, "after": await until_answered("probe")}))

asyncio.run(main())
"""

NODE = """
const fs = require("node:fs");
const { tools, ToolError } = require("inngest_tools");
const pause = () => new Promise((resolve) => setTimeout(resolve, 10));

async function untilAnswered(name) {
  for (;;) {
    try {
      return await tools[name]();
    } catch (error) {
      if (!(error instanceof ToolError) || error.type !== "TooManyCalls") throw error;
      await pause();
    }
  }
}

async function main() {
  const blocked = untilAnswered("block");
  let refused;
  for (;;) {
    try {
      await tools.probe();
    } catch (error) {
      refused = { type: error.type, retryable: error.retryable, message: error.message };
      break;
    }
    await pause();
  }
  fs.writeFileSync("refused", "");
  console.log(JSON.stringify({ refused, blocked: await blocked, after: await untilAnswered("probe") }));
}
main();
"""


async def _run(bridge: Bridge, work: Path, run_id: str, command: str) -> dict[str, object]:
    release = asyncio.Event()

    async def block() -> str:
        await release.wait()
        return "released"

    def probe() -> str:
        return "answered"

    async def release_once_refused() -> None:
        await wait_until(lambda: (work / "refused").exists())
        release.set()

    releaser = asyncio.ensure_future(release_once_refused())
    try:
        async with bridge.run(run_id) as step:
            result = await step.sandbox.commands.run(
                "agent",
                command,
                tools={"block": block, "probe": probe},
                cwd=work,
                timeout=60,
                tool_options=ToolOptions(max_in_flight=1),
            )
    finally:
        releaser.cancel()
    assert result.exit_code == 0, result.stderr
    out: dict[str, object] = json.loads(result.stdout)
    return out


def check(out: dict[str, object]) -> None:
    refused = out["refused"]
    assert isinstance(refused, dict)
    assert (refused["type"], refused["retryable"]) == ("TooManyCalls", True), refused
    assert "ToolOptions.max_in_flight" in refused["message"]
    assert (out["blocked"], out["after"]) == ("released", "answered")


async def test_python_client(bridge: Bridge, script: Callable[[str, str], Path], tmp_path: Path) -> None:
    script("agent.py", PYTHON)
    check(await _run(bridge, tmp_path, "busy-python", "python3 agent.py"))


async def test_node_client(bridge: Bridge, script: Callable[[str, str], Path], tmp_path: Path) -> None:
    script("agent.js", NODE)
    check(await _run(bridge, tmp_path, "busy-node", "node agent.js"))
