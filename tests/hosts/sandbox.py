"""A sandbox on another host, as far as the client can tell: a process given only its
environment (an address, a token, TLS files), optionally run inside a network namespace."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

WAIT = 60.0

CLIENT = """
import asyncio, json, sys
from inngest_tools import tools, ToolError

async def one(index, name, args):
    try:
        call = tools[name](**args) if isinstance(args, dict) else tools[name](*args)
        answer = {"result": await call}
    except ToolError as exc:
        answer = {"error": exc.type, "message": str(exc), "retryable": exc.retryable}
    print(json.dumps({"index": index, **answer}), flush=True)

async def main():
    # One event loop: every call travels on the same connection.
    calls = json.loads(sys.argv[1])
    if len(sys.argv) > 2:  # at once
        await asyncio.gather(*(one(i, name, args) for i, (name, args) in enumerate(calls)))
    else:
        for i, (name, args) in enumerate(calls):
            await one(i, name, args)

asyncio.run(main())
"""


NODE_PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "node" / "index.js"

NODE_CLIENT = """
const { tools } = require(NODE_PACKAGE);

async function one(index, name, args) {
  let answer;
  try {
    answer = { result: await (Array.isArray(args) ? tools[name](...args) : tools[name](args)) };
  } catch (error) {
    answer = { error: error.type, message: error.message, retryable: error.retryable };
  }
  console.log(JSON.stringify({ index, ...answer }));
}

(async () => {
  const calls = JSON.parse(process.argv[2]);
  if (process.argv.length > 3) {
    await Promise.all(calls.map(([name, args], i) => one(i, name, args)));
  } else {
    for (const [i, [name, args]] of calls.entries()) await one(i, name, args);
  }
})();
""".replace("NODE_PACKAGE", json.dumps(str(NODE_PACKAGE)))


def client_command(
    script: Path, calls: Sequence[tuple[str, Any]], netns: str | None = None, *, at_once: bool = False
) -> list[str]:
    """The argv that runs the client ``script`` with ``calls`` (inside ``netns`` if given)."""
    program = shutil.which("node") or "node" if script.suffix == ".js" else sys.executable
    argv = [program, str(script), json.dumps(calls), *(["at-once"] if at_once else [])]
    return ["ip", "netns", "exec", netns, *argv] if netns else argv


async def start_client(
    tmp_path: Path,
    calls: Sequence[tuple[str, Any]],
    env: Mapping[str, str],
    *,
    netns: str | None = None,
    at_once: bool = False,
    node: bool = False,
) -> asyncio.subprocess.Process:
    """Start the client (see :func:`run_client`); read its answers with :func:`answers`."""
    script = tmp_path / ("sandbox_client.js" if node else "sandbox_client.py")
    script.write_text(NODE_CLIENT if node else CLIENT)
    return await asyncio.create_subprocess_exec(
        *client_command(script, calls, netns, at_once=at_once),
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def answers(process: asyncio.subprocess.Process, timeout: float = WAIT) -> list[dict[str, Any]]:
    """The answers of a client started with :func:`start_client`, in call order."""
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode == 0, stderr.decode()
    lines = [json.loads(line) for line in stdout.decode().splitlines()]
    return [
        {k: v for k, v in line.items() if k != "index"} for line in sorted(lines, key=lambda x: x["index"])
    ]


async def run_client(
    tmp_path: Path,
    calls: Sequence[tuple[str, Any]],
    env: Mapping[str, str],
    *,
    netns: str | None = None,
    timeout: float = WAIT,
    node: bool = False,
) -> list[dict[str, Any]]:
    """Run the client (Python's, or Node's) in its own process with only ``env``; the JSON
    line it printed per call."""
    return await answers(await start_client(tmp_path, calls, env, netns=netns, node=node), timeout)
