"""A call that needs approval, through `toolbridge mcp` over stdio: the client is told how to
approve it, and is asked through elicitation when it offers that; without elicitation the
call waits until a person approves it with the `toolbridge approvals` CLI (another process)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.faces.conftest import REPO, TOOLBRIDGE, WAIT, app_env, calls
from tests.faces.test_mcp_face import TARGET, stdio
from toolbridge._journal.sqlite import SQLiteJournal


async def toolbridge(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode is not None
    return process.returncode, (out + err).decode()


async def decided(faces_dir: Path) -> list[dict[str, Any]]:
    journal = SQLiteJournal(faces_dir / "journal.db")
    await journal.open()
    try:
        return [req.to_dict() for req in await journal.approvals.list(states=None)]
    finally:
        await journal.close()


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # input_required, or elicitation/create
async def test_a_client_with_elicitation_approves_in_the_client(faces_dir: Path, mode: str) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"reason": "the customer called"})

    params = StdioServerParameters(command=TOOLBRIDGE, args=["mcp", TARGET], cwd=REPO, env=app_env(faces_dir))
    async with Client(params, elicitation_callback=elicit, mode=mode) as client:
        result = await asyncio.wait_for(client.call_tool("refund", {"sku": "R1"}), WAIT)
    assert not result.is_error, result
    assert result.structured_content == {"sku": "R1", "stock": 8}
    assert calls(faces_dir) == ["refund R1"]
    assert len(asked) == 1
    assert asked[0].startswith('Approve refund(sku="R1")?\n\n')  # a question a person can answer
    assert "toolbridge approvals approve apr_" in asked[0]  # the CLI line, as a hint
    (req,) = await decided(faces_dir)
    assert (req["state"], req["decided_by"], req["channel"], req["reason"]) == (
        "approved",
        "mcp client",
        "mcp",  # the face it came through, not "api"
        "the customer called",
    )


async def test_without_elicitation_the_call_waits_for_the_cli(faces_dir: Path) -> None:
    hints: list[str] = []
    hinted = asyncio.Event()

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        if message and "waits for a person" in message:
            hints.append(message)
            hinted.set()

    async with stdio(faces_dir) as client:
        call = asyncio.ensure_future(client.call_tool("refund", {"sku": "R2"}, progress_callback=progress))
        await asyncio.wait_for(hinted.wait(), WAIT)
        assert not call.done()
        assert calls(faces_dir) == []
        command = hints[0].partition(": ")[2].split(", or ")[0].split()
        assert command[:3] == ["toolbridge", "approvals", "approve"]
        status, said = await toolbridge(*command[1:], "--as", "carol")
        assert status == 0, said
        result = await asyncio.wait_for(call, WAIT)
    assert not result.is_error, result
    assert json.loads(result.content[0].text) == {"sku": "R2", "stock": 8}  # type: ignore[union-attr]
    assert calls(faces_dir) == ["refund R2"]
    (req,) = await decided(faces_dir)
    assert (req["state"], req["decided_by"], req["channel"]) == ("approved", "carol", "cli")


async def test_declined_in_the_client_the_call_is_rejected_and_the_tool_never_runs(faces_dir: Path) -> None:
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    params = StdioServerParameters(command=TOOLBRIDGE, args=["mcp", TARGET], cwd=REPO, env=app_env(faces_dir))
    async with Client(params, elicitation_callback=elicit) as client:
        result = await asyncio.wait_for(client.call_tool("refund", {"sku": "R3"}), WAIT)
    assert result.is_error
    assert result.meta is not None
    assert result.meta["toolbridge/error"]["type"] == "ApprovalRejected"
    assert calls(faces_dir) == []
    (req,) = await decided(faces_dir)
    assert (req["state"], req["decided_by"], req["channel"], req["reason"]) == (
        "rejected",
        "mcp client",
        "mcp",
        "declined in the MCP client",
    )


async def test_a_client_cannot_decide_a_request_it_was_not_asked(faces_dir: Path) -> None:
    hinted = asyncio.Event()

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        if message and "waits for a person" in message:
            hinted.set()

    async with stdio(faces_dir) as waiting, stdio(faces_dir) as other:
        call = asyncio.ensure_future(waiting.call_tool("refund", {"sku": "R4"}, progress_callback=progress))
        await asyncio.wait_for(hinted.wait(), WAIT)
        (req,) = await decided(faces_dir)
        # Another call (another run, another tool) sends an answer to that request unasked.
        forged: types.InputResponses = {str(req["id"]): types.ElicitResult(action="accept", content={})}
        result = await asyncio.wait_for(
            other.session.call_tool("lookup", {"sku": "L1"}, input_responses=forged), WAIT
        )
        assert isinstance(result, types.CallToolResult)
        assert not result.is_error
        (still,) = await decided(faces_dir)
        assert still["state"] == "pending"
        status, said = await toolbridge(
            "approvals", "approve", req["id"], "--journal", str(faces_dir / "journal.db")
        )
        assert status == 0, said
        assert not (await asyncio.wait_for(call, WAIT)).is_error
    assert [line for line in calls(faces_dir) if line.startswith("refund")] == ["refund R4"]
