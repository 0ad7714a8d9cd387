"""A journal on a full disk: calls are answered UNAVAILABLE, on both RPCs, and serving goes on.

The journal lives on a small tmpfs that a tool fills mid-run, so the failure is the real one
(SQLite's "database or disk is full"), seen by the real Python client in a real sandbox.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolbridge import Bridge

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root (CI runs as root)")

SCRIPT = """
import asyncio, json, os
from grpc import aio
from inngest_tools import tools, ToolError
from inngest_tools._proto import toolbridge_pb2 as pb, toolbridge_pb2_grpc as pb_grpc

def refusal(exc):
    return {"type": exc.type, "message": exc.message, "retryable": exc.retryable}

async def unary_echo(text):
    # The unary RPC, which the client itself does not use: the generated stub, by hand.
    async with aio.insecure_channel(os.environ["TOOLBRIDGE_ADDRESS"]) as channel:
        request = pb.CallToolRequest(tool_name="echo", positional_arguments_json=json.dumps([text]).encode())
        metadata = (("x-toolbridge-token", os.environ["TOOLBRIDGE_TOKEN"]),)
        try:
            response = await pb_grpc.ToolBridgeServiceStub(channel).CallTool(request, metadata=metadata)
            return {"value": json.loads(response.result_json)}
        except Exception as exc:
            return {"code": exc.code().name, "message": exc.details()}

async def main():
    out = {}
    try:
        out["fill"] = {"value": await tools.fill()}
    except ToolError as exc:
        out["fill"] = refusal(exc)
    try:
        out["stream"] = {"value": await tools.echo("while full")}
    except ToolError as exc:
        out["stream"] = refusal(exc)
    out["unary"] = await unary_echo("while full, unary")
    await tools.free()
    out["after"] = {"value": await tools.echo("after")}
    out["unary_after"] = await unary_echo("after, unary")
    print(json.dumps(out))

asyncio.run(main())
"""


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=True)


def fill_disk(directory: Path) -> int:
    """Write a file until the file system is full; return how many bytes it took."""
    written = 0
    chunk = b"\0" * 65536
    with open(directory / "filler", "wb", buffering=0) as filler:
        try:
            while True:
                written += filler.write(chunk) or 0
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    return written


async def test_a_full_disk_answers_unavailable_on_both_rpcs_and_serving_goes_on(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "4m") as disk:
        filled: list[int] = []

        def fill() -> str:
            filled.append(fill_disk(disk))
            return "filled"

        def free() -> None:
            (disk / "filler").unlink()

        def echo(text: str) -> str:
            return text

        (tmp_path / "probe.py").write_text(SCRIPT)
        async with Bridge(journal=disk / "journal.db") as bridge, bridge.run("full-disk") as step:
            result = await step.sandbox.commands.run(
                "probe",
                ["python3", "probe.py"],
                tools={"fill": fill, "free": free, "echo": echo},
                cwd=tmp_path,
            )
    assert result.exit_code == 0, result.stderr
    assert filled
    assert filled[0] > 0
    out = json.loads(result.stdout)
    # The call whose outcome could not be written, and a call made while the disk is full:
    # a retryable Unavailable that says what happened, and never SQLite's own words.
    for label in ("fill", "stream"):
        assert out[label]["type"] == "Unavailable", out
        assert out[label]["retryable"] is True
        assert "journal could not write" in out[label]["message"]
        assert "err_" in out[label]["message"]
        assert "disk" not in out[label]["message"]
    assert out["unary"]["code"] == "UNAVAILABLE", out
    assert "journal could not write" in out["unary"]["message"]
    # Space again: the same stream and a fresh unary call are served.
    assert out["after"] == {"value": "after"}
    assert out["unary_after"] == {"value": "after, unary"}
