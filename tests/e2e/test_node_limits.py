"""Every limit holds for Node commands as it does for Python ones."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from tests.e2e.node_launchers import LAUNCHERS
from toolbridge import Bridge, ToolOptions

ERROR_OF = """
const { tools, ToolError } = require("inngest_tools");
async function errorOf(call) {
  try {
    await call();
    return null;
  } catch (error) {
    if (!(error instanceof ToolError)) throw error;
    return { type: error.type, message: error.message, retryable: error.retryable };
  }
}
"""


@pytest.fixture(params=LAUNCHERS)
async def bridge(journal_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Bridge]:
    """Each test under both launchers; its folder readable by bubblewrap's sandbox user."""
    journal_path.parent.chmod(0o755)  # pytest's tmp_path is 0700; scripts are written 0644
    async with Bridge(journal=journal_path, sandbox=request.param) as opened:
        yield opened


async def test_the_command_is_stopped_after_max_calls(
    bridge: Bridge, script: Callable[[str, str], Path], tmp_path: Path
) -> None:
    script(
        "agent.js",
        ERROR_OF
        + """
        async function main() {
          for (let call = 1; ; call += 1) {
            const error = await errorOf(() => tools.ping(call));
            if (error) {
              console.log(JSON.stringify([call, error]));
              break;
            }
          }
          setInterval(() => {}, 1000); // would run on: the daemon stops it
        }
        main();
        """,
    )
    pinged: list[int] = []
    async with bridge.run("max-calls") as step:
        result = await step.sandbox.commands.run(
            "agent",
            "node agent.js",
            tools={"ping": pinged.append},
            tool_options=ToolOptions(max_calls=3),
            cwd=tmp_path,
        )
    assert result.stopped == "max_calls"
    assert result.exit_code != 0
    [(calls, error)] = [json.loads(line) for line in result.stdout.splitlines()]
    assert calls == 4
    assert error["type"] == "MaxCallsExceeded"
    assert "more than 3 tool calls" in error["message"]
    assert pinged == [1, 2, 3]


async def test_requests_and_replies_over_their_limits_fail_with_a_tool_error(
    bridge: Bridge, script: Callable[[str, str], Path], tmp_path: Path
) -> None:
    script(
        "agent.js",
        ERROR_OF
        + """
        async function main() {
          console.log(JSON.stringify({
            smallRequest: await errorOf(() => tools.echo("x".repeat(900))),
            largeRequest: await errorOf(() => tools.echo("x".repeat(1100))),
            smallReply: await errorOf(() => tools.repeat(900)),
            largeReply: await errorOf(() => tools.repeat(1100)),
          }));
        }
        main();
        """,
    )
    echoed: list[int] = []

    def echo(text: str) -> int:
        echoed.append(len(text))
        return len(text)

    async with bridge.run("sizes") as step:
        result = await step.sandbox.commands.run(
            "agent",
            "node agent.js",
            tools={"echo": echo, "repeat": lambda n: "y" * n},
            tool_options=ToolOptions(max_request_bytes=1024, max_reply_bytes=1024),
            cwd=tmp_path,
        )
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["smallRequest"] is None
    assert out["smallReply"] is None
    assert out["largeRequest"]["type"] == "RequestTooLarge"
    assert "at most 1024 bytes" in out["largeRequest"]["message"]
    assert out["largeReply"]["type"] == "ReplyTooLarge"
    assert echoed == [900]


async def test_a_tool_over_its_timeout_fails_with_a_retryable_tool_timeout(
    bridge: Bridge, script: Callable[[str, str], Path], tmp_path: Path
) -> None:
    script(
        "agent.js",
        ERROR_OF + "errorOf(() => tools.slow()).then((error) => console.log(JSON.stringify(error)));\n",
    )
    never = asyncio.Event()

    async def slow() -> None:
        await never.wait()

    async with bridge.run("timeout") as step:
        result = await step.sandbox.commands.run(
            "agent",
            "node agent.js",
            tools={"slow": slow},
            tool_options=ToolOptions(tool_timeout=0.2, attempts=1),
            cwd=tmp_path,
        )
    assert result.exit_code == 0, result.stderr
    error = json.loads(result.stdout)
    assert error["type"] == "ToolTimeout"
    assert error["retryable"] is True


async def test_a_token_that_is_not_the_commands_is_refused(
    bridge: Bridge, script: Callable[[str, str], Path], tmp_path: Path
) -> None:
    script(
        "agent.js",
        ERROR_OF
        + """
        const { definitions } = require("inngest_tools");
        async function main() {
          const callError = await errorOf(() => tools.ping(1));
          console.log(JSON.stringify([callError, await errorOf(() => definitions())]));
        }
        main();
        """,
    )
    pinged: list[int] = []
    async with bridge.run("token") as step:
        result = await step.sandbox.commands.run(
            "agent",
            "node agent.js",
            tools={"ping": pinged.append},
            env={"TOOLBRIDGE_TOKEN": "tb1.forged.secret"},
            cwd=tmp_path,
        )
    assert result.exit_code == 0, result.stderr
    call_error, definitions_error = json.loads(result.stdout)
    assert call_error["type"] == definitions_error["type"] == "Unauthenticated"
    assert pinged == []
