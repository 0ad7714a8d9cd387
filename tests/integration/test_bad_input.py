"""Bad input gets INVALID_ARGUMENT naming the problem, on both RPCs, and the stream lives on.

The requests are written as raw bytes, so that the test can send what a well-behaved
client never would (a tool name that is not UTF-8), on a real daemon's socket.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc import aio

from inngest_tools._proto import toolbridge_pb2 as pb
from tests.helpers import WAIT, HeldCommand, held_command
from toolbridge import Bridge

SERVICE = "/toolbridge.v1.ToolBridgeService"


def echo(value: object) -> object:
    return value


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (wire type 2), written by hand."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def call_bytes(name: bytes, positional: bytes = b"") -> bytes:
    """A CallToolRequest whose tool name is ``name``, UTF-8 or not."""
    return _field(1, name) + (_field(2, positional) if positional else b"")


def stream_bytes(call_id: int, call: bytes) -> bytes:
    return _varint(1 << 3) + _varint(call_id) + _field(2, call)


BAD_CALLS = [
    pytest.param(call_bytes(b"ec\xffho", b'["x"]'), "the tool name is not valid UTF-8", id="tool-name-utf8"),
    pytest.param(call_bytes(b"echo", b"[1e999]"), "the number 1e999 is out of range", id="1e999"),
    pytest.param(
        call_bytes(b"echo", b"[" + b"7" * 5000 + b"]"),
        "an integer of 5000 digits is too long",
        id="5000-digits",
    ),
    pytest.param(call_bytes(b"echo", b'["\\ud800"]'), "lone surrogate \\ud800", id="lone-surrogate"),
]


async def unary(held: HeldCommand, data: bytes) -> Any:
    async with aio.insecure_channel(held.address) as channel:
        rpc = channel.unary_unary(f"{SERVICE}/CallTool", response_deserializer=pb.CallToolResponse.FromString)
        return await rpc(data, metadata=held.metadata, timeout=WAIT)


async def stream(held: HeldCommand, messages: list[bytes]) -> dict[int, Any]:
    """Send ``messages`` on one CallToolStream; the answers by call id, once all have come."""
    async with aio.insecure_channel(held.address) as channel:
        rpc = channel.stream_stream(
            f"{SERVICE}/CallToolStream", response_deserializer=pb.CallToolStreamResponse.FromString
        )
        call = rpc(metadata=held.metadata, timeout=WAIT)
        answers: dict[int, Any] = {}
        for message in messages:
            await call.write(message)
            answer = await call.read()  # one at a time: the stream must answer each
            answers[answer.call_id] = answer
        await call.done_writing()
        assert await call.read() is aio.EOF
        assert await call.code() == grpc.StatusCode.OK
        return answers


@pytest.mark.parametrize(("data", "message"), BAD_CALLS)
async def test_unary_bad_input_is_invalid_argument(
    bridge: Bridge, tmp_path: Path, data: bytes, message: str
) -> None:
    async with held_command(bridge, tmp_path, {"echo": echo}) as held:
        with pytest.raises(grpc.RpcError) as refused:
            await unary(held, data)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert message in refused.value.details()
        good = await unary(held, call_bytes(b"echo", b'["still here"]'))
        assert good.result_json == b'"still here"'


@pytest.mark.parametrize(("data", "message"), BAD_CALLS)
async def test_stream_bad_input_is_answered_under_its_call_id_and_the_stream_stays_open(
    bridge: Bridge, tmp_path: Path, data: bytes, message: str
) -> None:
    async with held_command(bridge, tmp_path, {"echo": echo}) as held:
        answers = await stream(
            held,
            [
                stream_bytes(1, call_bytes(b"echo", b'["before"]')),
                stream_bytes(2, data),
                stream_bytes(3, call_bytes(b"echo", b'["after"]')),
            ],
        )
    assert answers[1].response.result_json == b'"before"'
    assert answers[2].WhichOneof("answer") == "status"
    assert answers[2].status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert message in answers[2].status.message
    assert answers[3].response.result_json == b'"after"'


async def test_a_message_that_is_not_protobuf_ends_only_its_own_stream(
    bridge: Bridge, tmp_path: Path
) -> None:
    async with held_command(bridge, tmp_path, {"echo": echo}) as held:
        with pytest.raises(grpc.RpcError) as refused:
            await unary(held, b"\xff\xff\xff")
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "not a CallToolRequest" in refused.value.details()
        async with aio.insecure_channel(held.address) as channel:
            rpc = channel.stream_stream(
                f"{SERVICE}/CallToolStream", response_deserializer=pb.CallToolStreamResponse.FromString
            )
            call = rpc(metadata=held.metadata, timeout=WAIT)
            await call.write(b"\xff\xff\xff")  # no call id to answer under
            assert await asyncio.wait_for(call.code(), WAIT) == grpc.StatusCode.INVALID_ARGUMENT
            assert "not a CallToolStreamRequest" in await call.details()
        # A fresh stream serves as before.
        answers = await stream(held, [stream_bytes(1, call_bytes(b"echo", b'["fine"]'))])
        assert answers[1].response.result_json == b'"fine"'


async def test_list_tools_refuses_bytes_that_are_not_its_request(bridge: Bridge, tmp_path: Path) -> None:
    async with (
        held_command(bridge, tmp_path, {"echo": echo}) as held,
        aio.insecure_channel(held.address) as channel,
    ):
        rpc = channel.unary_unary(
            f"{SERVICE}/ListTools", response_deserializer=pb.ListToolsResponse.FromString
        )
        with pytest.raises(grpc.RpcError) as refused:
            await rpc(b"\xff\xff\xff", metadata=held.metadata, timeout=WAIT)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "not a ListToolsRequest" in refused.value.details()
        listed = await rpc(pb.ListToolsRequest().SerializeToString(), metadata=held.metadata, timeout=WAIT)
        assert "echo" in [entry.name for entry in listed.tools]
