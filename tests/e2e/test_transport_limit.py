"""The transport refuses a message above the bridge's request limit before reading it.

A daemon in its own process (a host embedding ``Bridge``, serving a sidecar token), so that
its memory can be read from ``/proc``: four concurrent 60 MiB calls used to raise its peak
RSS by 520-620 MiB before the handler refused them; now grpc refuses each on its length.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc import aio

from inngest_tools._proto import toolbridge_pb2 as pb
from inngest_tools._proto import toolbridge_pb2_grpc as pb_grpc
from tests.helpers import WAIT

KIB = 1024
MIB = 1024 * KIB
BIG = 60 * MIB

HOST = """
import asyncio, json, sys
from toolbridge import Bridge

def size(text: str) -> int:
    return len(text)

async def main():
    async with Bridge(journal=sys.argv[1], tools={"size": size}) as bridge:
        token = await bridge.mint_token(run_id="limits", tools=["size"], max_calls=1000)
        print(json.dumps({"address": bridge.address, "token": token.token}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until told to stop

asyncio.run(main())
"""

# The test's own channel may send anything: the limit under test is the daemon's.
SEND_ANYTHING = [("grpc.max_send_message_length", 128 * MIB)]


@dataclass
class Daemon:
    process: subprocess.Popen[str]
    address: str
    token: str

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("x-toolbridge-token", self.token),)

    def peak_rss_kib(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise AssertionError("no VmHWM in /proc status")


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    script = tmp_path / "host.py"
    script.write_text(HOST)
    with subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "journal.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        try:
            ready = json.loads(process.stdout.readline())  # "" if the host died: the test fails
            yield Daemon(process, ready["address"], ready["token"])
        finally:
            process.stdin.close()
            process.wait(WAIT)


def size_call(text_bytes: int) -> pb.CallToolRequest:
    # [" and "] around the text: the call (name and arguments) is text_bytes + 4 + len("size").
    return pb.CallToolRequest(tool_name="size", positional_arguments_json=b'["' + b"a" * text_bytes + b'"]')


async def test_an_oversized_call_is_refused_at_the_transport_on_both_rpcs(daemon: Daemon) -> None:
    async with aio.insecure_channel(daemon.address, options=SEND_ANYTHING) as channel:
        stub = pb_grpc.ToolBridgeServiceStub(channel)
        # Just under the default limit (256 KiB for the call): served.
        fits = await stub.CallTool(size_call(256 * KIB - 8), metadata=daemon.metadata, timeout=WAIT)
        assert json.loads(fits.result_json) == 256 * KIB - 8
        before = daemon.peak_rss_kib()

        async def unary() -> grpc.RpcError:
            with pytest.raises(grpc.RpcError) as refused:
                await stub.CallTool(size_call(BIG), metadata=daemon.metadata, timeout=WAIT)
            return refused.value

        refusals = await asyncio.gather(*(unary() for _ in range(4)))
        for refused in refusals:
            assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "larger than max" in (refused.details() or "")

        call = stub.CallToolStream(metadata=daemon.metadata, timeout=WAIT)
        await call.write(pb.CallToolStreamRequest(call_id=1, call=size_call(BIG)))
        assert await call.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "larger than max" in (await call.details() or "")

        grown_kib = daemon.peak_rss_kib() - before
        assert grown_kib * KIB < BIG, f"the daemon's peak RSS grew by {grown_kib} KiB"

        # Still serving, on a fresh stream.
        call = stub.CallToolStream(metadata=daemon.metadata, timeout=WAIT)
        await call.write(pb.CallToolStreamRequest(call_id=2, call=size_call(10)))
        answer = await call.read()
        assert json.loads(answer.response.result_json) == 10
        await call.done_writing()


async def test_just_above_the_per_call_limit_is_a_clear_refusal_from_the_handler(daemon: Daemon) -> None:
    # Between the per-call limit and the transport's envelope: the handler's own message.
    async with aio.insecure_channel(daemon.address, options=SEND_ANYTHING) as channel:
        stub = pb_grpc.ToolBridgeServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            await stub.CallTool(size_call(256 * KIB), metadata=daemon.metadata, timeout=WAIT)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert f"a call may be at most {256 * KIB} bytes" in (refused.value.details() or "")
