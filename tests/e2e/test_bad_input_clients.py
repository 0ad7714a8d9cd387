"""Bad arguments from the real clients, in real sandboxes: INVALID_ARGUMENT, and calls go on.

A lone surrogate goes through each client's public API (both send it escaped, as
``JSON.stringify`` does, and the daemon names it; it used to hang the Node client). ``1e999``
and a 5,000-digit integer cannot be written by either client's encoder, so they go through
the client's own connection as raw JSON bytes, as a client in another language could send.
A tool name with a lone surrogate cannot be sent as asked (the proto codecs refuse it or put
U+FFFD in its place), so both clients refuse it themselves, with the same error type.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from toolbridge import Bridge

NODE = """
const { tools, ToolError } = require("inngest_tools");
// The package exports only its public API; its own modules by path, for the raw bytes.
const lib = require("node:path").join(require("node:path").dirname(require.resolve("inngest_tools")), "lib");
const { Connection } = require(`${lib}/connection.js`);
const { decodeStreamAnswer } = require(`${lib}/wire.js`);

async function errorOf(call) {
  try {
    return { value: await call() };
  } catch (error) {
    if (!(error instanceof ToolError)) throw error;
    return { type: error.type, message: error.message };
  }
}

async function main() {
  const raw = new Connection(process.env.TOOLBRIDGE_ADDRESS, process.env.TOOLBRIDGE_TOKEN);
  const rawEcho = (text) => raw.call("echo", Buffer.from(text), Buffer.alloc(0)).then(decodeStreamAnswer);
  const out = {
    surrogate: await errorOf(() => tools.echo("a\\ud800b")),
    badName: await errorOf(() => tools["ec\\ud800ho"]("x")),
    after: await errorOf(() => tools.echo("after")),
    e999: await errorOf(() => rawEcho("[1e999]")),
    digits: await errorOf(() => rawEcho("[" + "7".repeat(5000) + "]")),
    rawAfter: await errorOf(() => rawEcho('["raw after"]')),
  };
  raw.close();
  console.log(JSON.stringify(out));
}
main();
"""

PYTHON = """
import asyncio, json
from inngest_tools import tools, ToolError
from inngest_tools._client import _connection
from inngest_tools._transport import decode_stream_answer

async def outcome(call):
    try:
        return {"value": await call}
    except ToolError as exc:
        return {"type": exc.type, "message": exc.message}

async def raw_echo(text):
    return decode_stream_answer(await _connection().call("echo", text, b""))

async def main():
    out = {
        "surrogate": await outcome(tools.echo("a\\ud800b")),
        "badName": await outcome(tools["ec\\ud800ho"]("x")),
        "after": await outcome(tools.echo("after")),
        "e999": await outcome(raw_echo(b"[1e999]")),
        "digits": await outcome(raw_echo(b"[" + b"7" * 5000 + b"]")),
        "rawAfter": await outcome(raw_echo(b'["raw after"]')),
    }
    print(json.dumps(out))

asyncio.run(main())
"""

EXPECTED = {
    "surrogate": "lone surrogate \\ud800",
    "e999": "the number 1e999 is out of range",
    "digits": "an integer of 5000 digits is too long",
    # Refused by the client itself: the proto codec cannot carry it as the name asked for.
    "badName": "is not valid Unicode (it holds a lone surrogate)",
}


def echo(text: str) -> str:
    return text


def check(out: dict[str, dict[str, str]]) -> None:
    for label, message in EXPECTED.items():
        assert out[label]["type"] == "InvalidArgument", out
        assert message in out[label]["message"], out
    assert out["after"] == {"value": "after"}
    assert out["rawAfter"] == {"value": "raw after"}


async def test_node_client(bridge: Bridge, script: Callable[[str, str], Path], tmp_path: Path) -> None:
    script("agent.js", NODE)
    async with bridge.run("bad-node") as step:
        result = await step.sandbox.commands.run(
            "agent", "node agent.js", tools={"echo": echo}, cwd=tmp_path, timeout=60
        )
    assert result.exit_code == 0, result.stderr
    check(json.loads(result.stdout))


async def test_python_client(bridge: Bridge, script: Callable[[str, str], Path], tmp_path: Path) -> None:
    script("agent.py", PYTHON)
    async with bridge.run("bad-python") as step:
        result = await step.sandbox.commands.run(
            "agent", "python3 agent.py", tools={"echo": echo}, cwd=tmp_path, timeout=60
        )
    assert result.exit_code == 0, result.stderr
    check(json.loads(result.stdout))
