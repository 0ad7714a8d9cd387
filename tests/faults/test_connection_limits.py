"""Item 1: no sandbox starves another of connections or streams.

A command may hold ``ToolOptions.max_streams`` call streams open; the next is refused with
``RESOURCE_EXHAUSTED`` while other commands' calls go on. A connection that carries no call
is closed after ``Bridge(connection_idle=...)``, whether it speaks HTTP/2 or nothing at all.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc import aio

from inngest_tools._proto import toolbridge_pb2 as pb
from tests.helpers import WAIT, HeldCommand, call_request, held_command, raw_call, result_of
from toolbridge import Bridge, ToolOptions

HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # length 0, type SETTINGS, no flags, stream 0


async def ping() -> str:
    return "pong"


@contextlib.asynccontextmanager
async def open_stream(channel: aio.Channel, held: HeldCommand) -> AsyncIterator[aio.StreamStreamCall]:
    stream = held.stub(channel).CallToolStream(metadata=held.metadata)
    try:
        yield stream
    finally:
        stream.cancel()


async def ping_on(stream: aio.StreamStreamCall) -> str:
    await stream.write(pb.CallToolStreamRequest(call_id=1, call=call_request("ping")))
    answer = await asyncio.wait_for(stream.read(), WAIT)
    assert answer != aio.EOF
    return str(result_of(answer.response))


async def test_a_stream_past_max_streams_is_refused_and_other_commands_keep_working(
    bridge: Bridge, tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    # The held command's own client holds one stream: two more fill its three.
    options = ToolOptions(max_streams=3)
    async with (
        held_command(bridge, tmp_path / "a", {"ping": ping}, run_id="flood", tool_options=options) as flood,
        held_command(bridge, tmp_path / "b", {"ping": ping}, run_id="other", tool_options=options) as other,
        aio.insecure_channel(flood.address) as channel,
    ):
        async with open_stream(channel, flood) as first, open_stream(channel, flood) as second:
            assert [await ping_on(first), await ping_on(second)] == ["pong", "pong"]
            async with open_stream(channel, flood) as refused:
                with pytest.raises(aio.AioRpcError) as caught:
                    await ping_on(refused)
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "already has 3 call streams open" in str(caught.value.details())
            assert "ToolOptions.max_streams" in str(caught.value.details())
            # The flooded command's open streams and unary calls still work, and so do others'.
            assert await ping_on(first) == "pong"
            assert result_of(await raw_call(flood, call_request("ping"))) == "pong"
            assert result_of(await raw_call(other, call_request("ping"))) == "pong"
            async with (
                aio.insecure_channel(other.address) as others_channel,  # its own socket
                open_stream(others_channel, other) as others,
            ):
                assert await ping_on(others) == "pong"
            await second.done_writing()
            assert await asyncio.wait_for(second.read(), WAIT) == aio.EOF  # its slot is given back
        async with open_stream(channel, flood) as again:
            assert await ping_on(again) == "pong"
    result = await asyncio.wait_for(asyncio.shield(flood.result), WAIT)
    assert result.exit_code == 0, result.stderr


async def _closed_by_daemon(path: str, greeting: bytes) -> bool:
    """Connect, send ``greeting``, then read until the daemon closes the connection."""
    reader, writer = await asyncio.open_unix_connection(path)
    try:
        writer.write(greeting)
        await writer.drain()
        async with asyncio.timeout(WAIT):
            while await reader.read(65536):
                pass  # the daemon's SETTINGS, then its GOAWAY
        return True
    finally:
        writer.close()


async def test_idle_and_silent_connections_are_closed_after_connection_idle(tmp_path: Path) -> None:
    async with Bridge(None, connection_idle=0.5) as bridge:
        path = bridge.address.removeprefix("unix:")
        idle = _closed_by_daemon(path, HTTP2_PREFACE + EMPTY_SETTINGS)  # an HTTP/2 client that calls nothing
        silent = _closed_by_daemon(path, b"")  # half-open: says nothing at all
        assert list(await asyncio.gather(idle, silent)) == [True, True]
        async with aio.insecure_channel(bridge.address) as channel:  # and the bridge still serves
            await asyncio.wait_for(channel.channel_ready(), WAIT)


@pytest.mark.parametrize("value", [0, -1.0])
def test_connection_idle_must_be_positive(value: float) -> None:
    with pytest.raises(ValueError, match="connection_idle"):
        Bridge(None, connection_idle=value)


@pytest.mark.parametrize("value", [0, -1, 1.5])
def test_max_streams_must_be_a_whole_number_of_at_least_one(value: object) -> None:
    with pytest.raises(ValueError, match="max_streams"):
        ToolOptions(max_streams=value)  # type: ignore[arg-type]
