"""The Python client when a write meets a stream that just ended (the connection was lost).

grpcio's asyncio client then ends the stream ``INTERNAL`` "Internal error from Core" in place
of the status the connection gave (grpc/grpc issue 36066): the client told the calls on it
``ProtocolError`` (not retryable) and never sent them again, the one way a daemon killed or
cut off mid-write ended a call so (the history checker's soak saw two such calls given up).
The stream here is a fake that fails so every time; the connection's own code is the real one.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from grpc import aio

from inngest_tools import ToolError
from inngest_tools._proto import toolbridge_pb2 as pb
from inngest_tools._status import CORE_WRITE_FAILED, rpc_error
from inngest_tools._transport import BATCH_BYTES_METADATA_KEY, Connection


def core_write_failed() -> aio.AioRpcError:
    return aio.AioRpcError(
        grpc.StatusCode.INTERNAL, aio.Metadata(), aio.Metadata(), details=CORE_WRITE_FAILED
    )


class Stream:
    """A call stream whose first write fails as grpcio's does when the connection just went
    (``lost``), or that answers every call it is sent."""

    def __init__(self, *, lost: bool) -> None:
        self.lost = lost
        self.sent: list[int] = []
        self._metadata_read = asyncio.Event()
        self._answers: asyncio.Queue[Any] = asyncio.Queue()

    async def initial_metadata(self) -> tuple[tuple[str, str], ...]:
        self._metadata_read.set()
        return ((BATCH_BYTES_METADATA_KEY, "65536"),)

    async def write(self, message: Any) -> None:
        await self._metadata_read.wait()  # a daemon answered this stream's opening
        ids = [message.call_id, *(more.call_id for more in message.more)]
        self.sent += ids
        if self.lost:
            self._answers.put_nowait(core_write_failed())
            raise core_write_failed()
        for call_id in ids:
            result = pb.CallToolResponse(result_json=b'{"ok": true}')
            self._answers.put_nowait(pb.CallToolStreamResponse(call_id=call_id, response=result))

    def __aiter__(self) -> Stream:
        return self

    async def __anext__(self) -> Any:
        answer = await self._answers.get()
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def cancel(self) -> None:
        self._answers.put_nowait(StopAsyncIteration())


class Stub:
    def __init__(self) -> None:
        self.streams = [Stream(lost=True), Stream(lost=False)]
        self.opened: list[Stream] = []

    def CallToolStream(self, metadata: Any) -> Stream:
        stream = self.streams.pop(0)
        self.opened.append(stream)
        return stream


class Channel:
    async def channel_ready(self) -> None:
        return None

    async def close(self) -> None:
        return None


def test_the_core_s_failed_write_is_a_lost_connection_and_a_daemon_s_internal_is_not() -> None:
    lost = rpc_error(core_write_failed())
    assert (lost.type, lost.retryable) == ("Unavailable", True)
    daemon = aio.AioRpcError(
        grpc.StatusCode.INTERNAL,
        aio.Metadata(),
        aio.Metadata(),
        details="the host failed unexpectedly (error id err_1); the host's log has the detail",
    )
    assert (rpc_error(daemon).type, rpc_error(daemon).retryable) == ("ProtocolError", False)


async def test_a_call_whose_write_met_the_end_of_its_stream_goes_again_on_a_new_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TOOLBRIDGE_TLS_CA", raising=False)
    connection = Connection("127.0.0.1:9", "token")  # never dialled: its stub is the fake
    stub = Stub()
    connection._stub = stub
    connection._channel = Channel()
    try:
        answer = await asyncio.wait_for(connection.call("t", b"", b"{}"), 10)
    except ToolError as error:
        raise AssertionError(f"the call failed: {error.type}: {error}") from None
    assert answer.response.result_json == b'{"ok": true}'
    first, second = stub.opened
    assert first.sent == second.sent == [1]  # the same call, under the same id
