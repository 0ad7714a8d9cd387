"""Calls and answers in batches on CallToolStream, and peers that never asked for them.

A client that opens the stream with ``x-toolbridge-batches: 1`` may send several calls in one
message (``more``) and reads several answers in one; the daemon says in its initial metadata
how large a message it reads. The daemon side is checked with raw messages on a real
daemon's socket; the client side (a real ``inngest_tools`` in its own process) against a
scripted peer that records every message, as a daemon that batches and as one that does not.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc import aio

from inngest_tools._proto import toolbridge_pb2 as pb
from tests.helpers import WAIT, HeldCommand, client_elsewhere, held_command
from tests.integration.test_bad_input import _field, call_bytes, stream_bytes
from toolbridge import Bridge

SERVICE = "/toolbridge.v1.ToolBridgeService"
BATCHES = ("x-toolbridge-batches", "1")
BATCH_BYTES_KEY = "x-toolbridge-batch-bytes"
CALLS = 10


class Together:
    """A tool whose calls all return in the same turn, once :data:`CALLS` of them have started:
    their answers are ready at once, so a daemon that batches answers sends them together."""

    def __init__(self) -> None:
        self.entered = 0
        self.all_in = asyncio.Event()

    async def together(self, value: int) -> int:
        self.entered += 1
        if self.entered == CALLS:
            self.all_in.set()
        await self.all_in.wait()
        return value * 2


def call(call_id: int, value: int) -> pb.CallToolStreamRequest:
    request = pb.CallToolRequest(tool_name="together", positional_arguments_json=json.dumps([value]).encode())
    return pb.CallToolStreamRequest(call_id=call_id, call=request)


def batch_of_calls() -> bytes:
    """One message carrying :data:`CALLS` calls of ``together``, call ``n`` doubling ``n``."""
    batch = call(1, 1)
    batch.more.extend(call(number, number) for number in range(2, CALLS + 1))
    return batch.SerializeToString()


async def exchange(
    held: HeldCommand, data: bytes, expected: int, *, batches: bool
) -> tuple[dict[str, str], list[pb.CallToolStreamResponse]]:
    """Send one message; the stream's initial metadata and the messages that answered it."""
    metadata = (*held.metadata, BATCHES) if batches else held.metadata
    async with aio.insecure_channel(held.address) as channel:
        rpc = channel.stream_stream(
            f"{SERVICE}/CallToolStream", response_deserializer=pb.CallToolStreamResponse.FromString
        )
        stream = rpc(metadata=metadata, timeout=WAIT)
        await stream.write(data)
        messages: list[pb.CallToolStreamResponse] = []
        while sum(1 + len(message.more) for message in messages) < expected:
            messages.append(await stream.read())
        initial = {key: str(value) for key, value in await stream.initial_metadata()}
        await stream.done_writing()
    return initial, messages


def answers_of(messages: list[pb.CallToolStreamResponse]) -> dict[int, pb.CallToolStreamResponse]:
    return {answer.call_id: answer for message in messages for answer in (message, *message.more)}


@pytest.fixture
async def together(tmp_path: Path) -> AsyncIterator[tuple[HeldCommand, Together]]:
    tool = Together()
    async with (
        Bridge(journal=tmp_path / "journal.db", max_request_bytes=8192) as bridge,
        held_command(bridge, tmp_path, {"together": tool.together}) as held,
    ):
        yield held, tool


async def test_a_batch_is_answered_call_by_call_and_in_batches(
    together: tuple[HeldCommand, Together],
) -> None:
    held, _ = together
    initial, messages = await exchange(held, batch_of_calls(), CALLS, batches=True)
    assert initial[BATCH_BYTES_KEY] == str(8192 + 1024)  # the transport's limit: the call's and the envelope
    answers = answers_of(messages)
    assert sorted(answers) == list(range(1, CALLS + 1))
    for call_id, answer in answers.items():
        assert json.loads(answer.response.result_json) == call_id * 2
    assert len(messages) < CALLS  # answers ready together went together
    assert all(not entry.more for message in messages for entry in message.more)


async def test_a_client_that_did_not_ask_gets_one_answer_per_message(
    together: tuple[HeldCommand, Together],
) -> None:
    held, _ = together
    initial, messages = await exchange(held, batch_of_calls(), CALLS, batches=False)
    assert BATCH_BYTES_KEY not in initial
    assert len(messages) == CALLS
    assert all(not message.more for message in messages)
    assert sorted(answers_of(messages)) == list(range(1, CALLS + 1))


async def test_a_bad_call_in_a_batch_is_refused_alone(together: tuple[HeldCommand, Together]) -> None:
    held, tool = together
    good = [stream_bytes(number, call_bytes(b"together", b"[%d]" % number)) for number in range(3, CALLS + 3)]
    data = (
        stream_bytes(1, call_bytes(b"toge\xffther", b"[1]"))  # not UTF-8: refused, and only it
        + _field(3, stream_bytes(2, call_bytes(b"together", b"[2]")) + _field(3, good[0]))  # nested
        + b"".join(_field(3, entry) for entry in good)
    )
    _, messages = await exchange(held, data, CALLS + 2, batches=True)
    answers = answers_of(messages)
    assert answers[1].status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "the tool name is not valid UTF-8 (byte 0xff at offset 4)" in answers[1].status.message
    assert answers[2].status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "a call in a batch carries more calls of its own" in answers[2].status.message
    for number in range(3, CALLS + 3):
        assert json.loads(answers[number].response.result_json) == number * 2
    assert tool.entered == CALLS  # the refused calls reached no tool


async def test_the_client_splits_batches_at_the_daemons_limit(tmp_path: Path) -> None:
    # 60 calls of about 1 KiB in flight at once, on a daemon that reads at most 3 KiB per
    # message: a client that packed them all into one message would lose every call.
    script = tmp_path / "many.py"
    script.write_text(
        textwrap.dedent(
            """
            import asyncio, json
            from inngest_tools import tools

            async def main():
                await tools.echo("first")  # the stream is open and the daemon has said its limit
                values = await asyncio.gather(*(tools.echo("x" * 1000 + str(n)) for n in range(60)))
                print(json.dumps([value[1000:] for value in values]))

            asyncio.run(main())
            """
        )
    )
    async with (
        Bridge(journal=tmp_path / "journal.db", max_request_bytes=2048) as bridge,
        bridge.run("r") as step,
    ):
        result = await step.sandbox.commands.run(
            "many", ["python3", str(script)], tools={"echo": lambda value: value}, cwd=tmp_path, timeout=WAIT
        )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [str(n) for n in range(60)]


class ScriptedDaemon:
    """A CallToolStream peer that records each message's calls and answers every call."""

    def __init__(self, batch_bytes: int | None) -> None:
        self.batch_bytes = batch_bytes  # None: it never says it reads batches (an older daemon)
        self.messages: list[tuple[int, int]] = []  # (calls in the message, its size in bytes)
        self.asked: list[str] = []

    async def stream(self, requests: AsyncIterator[bytes], context: aio.ServicerContext[Any, Any]) -> None:
        self.asked.append(dict(context.invocation_metadata() or ()).get(BATCHES[0], ""))
        if self.batch_bytes is not None:
            await context.send_initial_metadata(((BATCH_BYTES_KEY, str(self.batch_bytes)),))
        async for data in requests:
            message = pb.CallToolStreamRequest.FromString(data)
            calls = [message, *message.more]
            self.messages.append((len(calls), len(data)))
            answers = [
                pb.CallToolStreamResponse(
                    call_id=entry.call_id,
                    response=pb.CallToolResponse(result_json=entry.call.positional_arguments_json[1:-1]),
                )
                for entry in calls
            ]
            if self.batch_bytes is None:
                for answer in answers:
                    await context.write(answer.SerializeToString())
            else:  # all of a message's answers in one message, as the client asked
                answers[0].more.extend(answers[1:])
                await context.write(answers[0].SerializeToString())


MANY_CLIENT = textwrap.dedent(
    """
    import asyncio, json, sys
    from inngest_tools import tools

    async def main():
        await tools.echo(-1)
        values = await asyncio.gather(*(tools.echo(n) for n in range(int(sys.argv[1]))))
        print(json.dumps(values))

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("batch_bytes", [1024, None], ids=["daemon-reads-batches", "older-daemon"])
async def test_the_client_batches_only_for_a_daemon_that_said_so(
    tmp_path: Path, batch_bytes: int | None
) -> None:
    peer = ScriptedDaemon(batch_bytes)
    server = aio.server()
    handler = grpc.method_handlers_generic_handler(
        SERVICE[1:], {"CallToolStream": grpc.stream_stream_rpc_method_handler(peer.stream)}
    )
    server.add_generic_rpc_handlers((handler,))
    address = f"unix:{tmp_path / 'peer.sock'}"
    server.add_insecure_port(address)
    await server.start()
    try:
        [values] = await client_elsewhere(tmp_path, MANY_CLIENT, "200", address, "token")
    finally:
        await server.stop(None)
    assert values == list(range(200))
    assert peer.asked == ["1"]
    calls_per_message = [calls for calls, _ in peer.messages]
    assert sum(calls_per_message) == 201
    if batch_bytes is None:
        assert set(calls_per_message) == {1}
    else:
        assert max(calls_per_message) > 1
        assert max(size for _, size in peer.messages) <= batch_bytes
