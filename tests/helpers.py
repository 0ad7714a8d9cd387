"""Test helpers: a command held open so a test can use its token from outside the sandbox."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc import aio

from inngest_tools._proto import toolbridge_pb2 as pb
from inngest_tools._proto import toolbridge_pb2_grpc as pb_grpc
from toolbridge import Bridge, CommandResult, ToolOptions

WAIT = 30.0
"""Seconds a test waits for an event before it fails."""

HOLDER = textwrap.dedent(
    """
    import asyncio, os
    from inngest_tools import tools

    async def main():
        await tools.ready(os.environ["TOOLBRIDGE_ADDRESS"], os.environ["TOOLBRIDGE_TOKEN"])
        await tools.hold()

    asyncio.run(main())
    """
)


@dataclass
class HeldCommand:
    """A running command, paused inside a tool call, whose token the test can use."""

    address: str
    token: str
    result: asyncio.Task[CommandResult]

    def stub(self, channel: aio.Channel) -> Any:
        return pb_grpc.ToolBridgeServiceStub(channel)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("x-toolbridge-token", self.token),)


@contextlib.asynccontextmanager
async def held_command(
    bridge: Bridge,
    tmp_path: Path,
    tools: Mapping[str, object],
    *,
    run_id: str = "held",
    name: str = "held",
    tool_options: ToolOptions | None = None,
) -> AsyncIterator[HeldCommand]:
    """Start a command that reports its address and token, then waits until the test ends."""
    ready: asyncio.Future[tuple[str, str]] = asyncio.get_running_loop().create_future()
    holding = asyncio.Event()
    release = asyncio.Event()

    async def report(address: str, token: str) -> None:
        ready.set_result((address, token))

    async def hold() -> None:
        holding.set()
        await release.wait()

    script = tmp_path / f"{name}.py"
    script.write_text(HOLDER)
    all_tools = {**tools, "ready": report, "hold": hold}

    async def run() -> CommandResult:
        async with bridge.run(run_id) as step:
            return await step.sandbox.commands.run(
                name,
                ["python3", str(script)],
                tools=all_tools,
                tool_options=tool_options,
                cwd=tmp_path,
            )

    task = asyncio.create_task(run())
    try:
        # Yield only once the command sits in `hold`: both of its calls have been counted.
        waiters: set[asyncio.Future[Any]] = {task, asyncio.ensure_future(holding.wait())}
        done, _ = await asyncio.wait(waiters, timeout=WAIT, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            result = task.result()
            raise AssertionError(f"the held command ended early: {result}")
        address, token = ready.result()
        yield HeldCommand(address, token, task)
    finally:
        release.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, WAIT)


def call_request(tool: str, positional: bytes = b"", named: bytes = b"") -> pb.CallToolRequest:
    return pb.CallToolRequest(
        tool_name=tool, positional_arguments_json=positional, named_arguments_json=named
    )


async def raw_call(held: HeldCommand, request: pb.CallToolRequest, token: str | None = None) -> Any:
    """One unary CallTool with the held command's token (or another one)."""
    metadata = held.metadata if token is None else (("x-toolbridge-token", token),)
    async with aio.insecure_channel(held.address) as channel:
        return await held.stub(channel).CallTool(request, metadata=metadata)


async def raw_status(
    held: HeldCommand, request: pb.CallToolRequest, token: str | None = None
) -> grpc.RpcError:
    """The status error a unary CallTool fails with."""
    try:
        response = await raw_call(held, request, token)
    except grpc.RpcError as exc:
        return exc
    raise AssertionError(f"expected the call to fail with a status, got {response}")


def result_of(response: Any) -> Any:
    assert response.WhichOneof("outcome") == "result_json", response
    return json.loads(response.result_json)


def error_of(response: Any) -> Any:
    assert response.WhichOneof("outcome") == "error", response
    return response.error


async def wait_until(condition: Callable[[], bool], timeout: float = WAIT) -> None:
    """Wait for a condition that no event announces (a process dying), failing after ``timeout``."""
    async with asyncio.timeout(timeout):
        while not condition():  # noqa: ASYNC110 - nothing to wait on but the condition itself
            await asyncio.sleep(0.01)


class Blocker:
    """Tools for flooding a command: ``block`` waits until :attr:`release` is set (counted in
    :attr:`entered`), ``ping`` answers at once."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered = 0

    async def block(self) -> str:
        self.entered += 1
        await self.release.wait()
        return "done"

    async def ping(self) -> str:
        return "pong"

    @property
    def tools(self) -> dict[str, Callable[[], Awaitable[str]]]:
        return {"block": self.block, "ping": self.ping}


async def client_elsewhere(
    tmp_path: Path, client: str, argument: str, address: str, token: str, timeout: float = WAIT
) -> list[Any]:
    """Run ``client`` (a script) in its own process, as a sandbox the daemon did not start,
    with ``argument``; the JSON lines it printed."""
    script = tmp_path / "client.py"
    script.write_text(client)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        argument,
        env={"TOOLBRIDGE_ADDRESS": address, "TOOLBRIDGE_TOKEN": token, "PATH": "/usr/bin:/bin"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode == 0, stderr.decode()
    return [json.loads(line) for line in stdout.decode().splitlines()]
