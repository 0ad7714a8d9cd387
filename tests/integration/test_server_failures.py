"""The servicer's catch-all: every RPC answers an unexpected failure with a status, via one table.

A real grpc.aio server on a Unix socket whose ``authenticate`` fails the way a dependency
of the edge can (the journal's token lookup): a ``JournalError`` of any kind becomes
``UNAVAILABLE``; anything else ``INTERNAL`` with an error id and never the exception's text.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc import aio

from inngest_tools._proto import toolbridge_pb2 as pb
from inngest_tools._proto import toolbridge_pb2_grpc as pb_grpc
from tests.helpers import WAIT
from toolbridge._calls.scope import CommandScope
from toolbridge._errors import JournalError
from toolbridge._server.service import start_server

SECRET = "password=hunter2"


class LeaseLostError(JournalError):
    """Stands for any JournalError subclass (a lost run lease): mapped by the base class."""


FAILURES = [
    pytest.param(RuntimeError(SECRET), grpc.StatusCode.INTERNAL, "failed unexpectedly", id="unexpected"),
    pytest.param(
        JournalError(f"journal write failed: {SECRET}"),
        grpc.StatusCode.UNAVAILABLE,
        "journal could not write",
        id="journal",
    ),
    pytest.param(
        LeaseLostError(SECRET), grpc.StatusCode.UNAVAILABLE, "journal could not write", id="subclass"
    ),
]


@pytest.fixture
async def failing_server(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    failure: Exception = request.param

    async def authenticate(token: str) -> CommandScope | None:
        raise failure

    server, [address] = await start_server(authenticate, [f"unix:{tmp_path / 'bridge.sock'}"])
    try:
        yield address
    finally:
        await server.stop(None)


def _checked(code: int, message: str, expected: grpc.StatusCode, words: str) -> str:
    assert code == expected.value[0], message
    assert words in message
    assert SECRET not in message
    error_id = message.split("error id ")[1].split(")")[0]
    assert error_id.startswith("err_")
    return error_id


@pytest.mark.parametrize(("failing_server", "expected", "words"), FAILURES, indirect=["failing_server"])
async def test_every_rpc_answers_through_the_table(
    failing_server: str, expected: grpc.StatusCode, words: str, caplog: pytest.LogCaptureFixture
) -> None:
    metadata = (("x-toolbridge-token", "tb1.any"),)
    ids: list[str] = []
    with caplog.at_level(logging.ERROR, logger="toolbridge"):
        async with aio.insecure_channel(failing_server) as channel:
            stub = pb_grpc.ToolBridgeServiceStub(channel)
            with pytest.raises(grpc.RpcError) as unary:
                await stub.CallTool(pb.CallToolRequest(tool_name="echo"), metadata=metadata, timeout=WAIT)
            ids.append(_checked(unary.value.code().value[0], unary.value.details() or "", expected, words))

            with pytest.raises(grpc.RpcError) as listed:
                await stub.ListTools(pb.ListToolsRequest(), metadata=metadata, timeout=WAIT)
            ids.append(_checked(listed.value.code().value[0], listed.value.details() or "", expected, words))

            stream = stub.CallToolStream(metadata=metadata, timeout=WAIT)
            for call_id in (1, 2):  # the stream answers each call, and stays open for the next
                await stream.write(
                    pb.CallToolStreamRequest(call_id=call_id, call=pb.CallToolRequest(tool_name="x"))
                )
                answer = await stream.read()
                assert answer.call_id == call_id
                ids.append(_checked(answer.status.code, answer.status.message, expected, words))
            await stream.done_writing()
            assert await stream.code() == grpc.StatusCode.OK
    assert len(set(ids)) == 4
    for error_id in ids:  # the host's log has the detail under each id
        [record] = [r for r in caplog.records if error_id in r.getMessage()]
        assert SECRET in record.getMessage() or (record.exc_info and SECRET in str(record.exc_info[1]))
