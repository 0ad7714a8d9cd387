"""The Python client replaces its call stream once it is old and carries no call.

grpcio never moves an open stream to a new connection: a stream kept for the life of a
process would keep its connection past the age at which the daemon tells it to go
(``max_connection_age``). Here ``STREAM_LIFETIME`` is 0, so every
call that finds the stream idle replaces it, and the old one has ended before the new one
opens: a command never holds one stream more than before (its ``max_streams`` may be 1).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from inngest_tools import _client, _transport, tools
from tests.helpers import WAIT, held_command
from toolbridge import Bridge, ToolOptions


@pytest.fixture
def overlaps(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """This process's client, with no connection yet and streams that age at once; for each
    stream it opens, whether the one before it was still open then."""
    monkeypatch.setattr(_transport, "STREAM_LIFETIME", 0.0)
    monkeypatch.setattr(_client, "_connections", {})
    monkeypatch.setattr(_client, "_last", None)
    opened: list[Any] = []
    overlapped: list[bool] = []
    open_stream = _transport.Connection._open_stream

    def recorded(connection: _transport.Connection) -> Any:
        overlapped.append(bool(opened) and not opened[-1].done())
        opened.append(open_stream(connection))
        return opened[-1]

    monkeypatch.setattr(_transport.Connection, "_open_stream", recorded)
    return overlapped


def current_stream() -> Any:
    return _client._connection()._stream


async def test_an_idle_old_stream_is_replaced_and_one_carrying_a_call_is_kept(
    bridge: Bridge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overlaps: list[bool]
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def wait_for_release() -> str:
        entered.set()
        await release.wait()
        return "released"

    async def ping() -> str:
        return "pong"

    options = ToolOptions(max_streams=2)  # the held command's own stream, and this client's
    async with held_command(
        bridge, tmp_path, {"ping": ping, "wait_for_release": wait_for_release}, tool_options=options
    ) as held:
        monkeypatch.setenv("TOOLBRIDGE_ADDRESS", held.address)
        monkeypatch.setenv("TOOLBRIDGE_TOKEN", held.token)
        streams = []
        for _ in range(3):  # each call finds the last one's stream idle and aged: a new one
            assert await asyncio.wait_for(tools.ping(), WAIT) == "pong"
            streams.append(current_stream())
        assert len({id(stream) for stream in streams}) == 3
        assert overlaps == [False, False, False]  # each replaced one had ended first

        waiting = asyncio.ensure_future(tools.wait_for_release())
        await asyncio.wait_for(entered.wait(), WAIT)
        carrying = current_stream()
        assert carrying is not streams[-1]  # the waiting call took a new stream...
        # ...which is kept while that call is in flight, however old: this call joins it.
        assert await asyncio.wait_for(tools.ping(), WAIT) == "pong"
        assert current_stream() is carrying
        release.set()
        assert await asyncio.wait_for(waiting, WAIT) == "released"
        assert await asyncio.wait_for(tools.ping(), WAIT) == "pong"  # idle again: replaced
        assert current_stream() is not carrying
        assert not any(overlaps)
        await _client._connection()._channel.close()  # gone before the bridge closes, not waited for
