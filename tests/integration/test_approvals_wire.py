"""The stream contract for a call that waits on a person: a ``CallWaiting`` message first (so
the client applies no deadline of its own), then the answer, both under the call's id; and
host calls (``Bridge.call_tool``) waiting the same way."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from grpc import aio

from inngest_tools._proto import toolbridge_pb2 as pb
from tests.helpers import WAIT, held_command
from toolbridge import Bridge, RunWaiting, ToolError, ToolOptions, tool
from toolbridge._calls.hub import POLL_INTERVAL


def wire(args: dict[str, int]) -> dict[str, int]:
    return {"wired": args["amount"]}


async def test_the_stream_says_a_call_waits_then_answers_it(bridge: Bridge, tmp_path: Path) -> None:
    tools = {"wire": tool.step(run=wire, requires_confirmation=True)}
    async with held_command(bridge, tmp_path, tools) as held, aio.insecure_channel(held.address) as channel:
        stream = held.stub(channel).CallToolStream(metadata=held.metadata)
        await stream.write(
            pb.CallToolStreamRequest(
                call_id=7,
                call=pb.CallToolRequest(tool_name="wire", named_arguments_json=b'{"amount": 5}'),
            )
        )
        note = await asyncio.wait_for(stream.read(), WAIT)
        assert note.call_id == 7
        assert note.WhichOneof("answer") == "waiting"
        (req,) = await bridge.approvals.list()
        assert note.waiting.request_id == req.id
        assert (note.waiting.kind, note.waiting.summary) == ("approval", "wire(amount=5)")
        assert note.waiting.expires_at_ms == round(req.expires_at * 1000)
        await bridge.approvals.approve(req.id, by="alice")
        answer = await asyncio.wait_for(stream.read(), WAIT)
        await stream.done_writing()
    assert answer.call_id == 7
    assert json.loads(answer.response.result_json) == {"wired": 5}


async def test_a_host_call_waits_too_and_raises_run_waiting_after_the_hold() -> None:
    refund = tool.step(run=wire, requires_confirmation=True)
    async with Bridge(journal=None, tools={"wire": refund}) as memory:  # requests kept in memory
        with pytest.raises(RunWaiting) as waiting:
            await memory.call_tool(
                "wire", {"amount": 3}, run_id="r", tool_options=ToolOptions(approval_hold=0.2)
            )
        (req,) = waiting.value.requests
        assert req.summary == "wire(amount=3)"
        await memory.approvals.approve(req.id, by="alice")
        # Without a journal there is no replay, but the decision is kept for the same call.
        assert await memory.call_tool("wire", {"amount": 3}, run_id="r") == {"wired": 3}

        call = asyncio.create_task(memory.call_tool("wire", {"amount": 4}, run_id="s"))
        async with asyncio.timeout(WAIT):
            while not (found := await memory.approvals.list(run_id="s")):  # noqa: ASYNC110
                await asyncio.sleep(POLL_INTERVAL / 10)
        await memory.approvals.reject(found[0].id, by="bob", reason="no")
        with pytest.raises(ToolError) as rejected:
            await asyncio.wait_for(call, WAIT)
        assert rejected.value.type == "ApprovalRejected"
