"""The MCP face as a user runs it: the official SDK's client against `toolbridge mcp` in a
subprocess, over stdio and over Streamable HTTP. Every call goes through the bridge's pipeline
and its journal; a retry with the same run id is answered from the journal."""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.faces.app import TOOLS
from tests.faces.conftest import REPO, TOOLBRIDGE, WAIT, app_env, calls, open_gate, serving
from toolbridge import Bridge
from toolbridge._journal.sqlite import SQLiteJournal
from toolbridge._records import StepRecord

TARGET = "tests.faces.app:bridge"
RUN_ID = "toolbridge/run_id"


def run(run_id: str) -> types.RequestParamsMeta:
    """The request ``_meta`` that makes a call a step of ``run_id``."""
    return cast(types.RequestParamsMeta, {RUN_ID: run_id})


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def stdio(faces_dir: Path, *extra: str) -> Client:
    params = StdioServerParameters(
        command=TOOLBRIDGE, args=["mcp", TARGET, *extra], cwd=REPO, env=app_env(faces_dir)
    )
    return Client(params)


@contextlib.asynccontextmanager
async def http_server(faces_dir: Path, listen: str, *extra: str) -> AsyncIterator[tuple[str, str]]:
    """``toolbridge mcp --http LISTEN``: its URL and the bearer token it printed."""
    async for url, process in serving(
        "mcp", TARGET, "--http", listen, *extra, env=app_env(faces_dir), prefix="TOOLBRIDGE_MCP_URL"
    ):
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), WAIT)).decode().strip()
        assert line.startswith("TOOLBRIDGE_MCP_TOKEN="), line
        yield url, line.removeprefix("TOOLBRIDGE_MCP_TOKEN=")


@contextlib.asynccontextmanager
async def bearer_client(url: str, token: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


async def steps_of(faces_dir: Path, run_id: str) -> list[StepRecord]:
    journal = SQLiteJournal(faces_dir / "journal.db")
    await journal.open()
    try:
        return await journal.load_steps(run_id)
    finally:
        await journal.close()


async def check_calls(client: Client, faces_dir: Path) -> None:
    """What every transport must do: list, call, fail, and replay a retry from the journal."""
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert sorted(listed) == ["lookup", "miscount", "refund", "refuse", "slow"]
    assert listed["lookup"].input_schema["required"] == ["sku"]
    assert listed["lookup"].output_schema is not None
    assert listed["lookup"].annotations is not None
    assert listed["lookup"].annotations.title == "Lookup"

    result = await client.call_tool("lookup", {"sku": "A1"}, meta=run("order-1"))
    assert not result.is_error
    assert result.structured_content == {"sku": "A1", "stock": 7}
    assert json.loads(text(result)) == {"sku": "A1", "stock": 7}
    assert result.meta is not None
    assert result.meta[RUN_ID] == "order-1"
    assert len(calls(faces_dir)) == 1

    again = await client.call_tool("lookup", {"sku": "A1"}, meta=run("order-1"))
    assert again.structured_content == result.structured_content
    assert len(calls(faces_dir)) == 1, "the retry was answered from the journal, not run again"

    refused = await client.call_tool("refuse", {"sku": "Z9"})
    assert refused.is_error
    assert refused.meta is not None
    assert refused.meta["toolbridge/error"]["type"] == "UnknownWarehouse"
    assert text(refused) == "UnknownWarehouse: no warehouse stocks Z9"

    bad = await client.call_tool("miscount", {"sku": "B2"})
    assert bad.is_error
    assert bad.meta is not None
    error = bad.meta["toolbridge/error"]
    assert error["type"] == "OutputValidationError"
    assert error["error_id"].startswith("err_")
    assert error["error_id"] in text(bad)

    invalid = await client.call_tool("lookup", {"sku": 5})
    assert invalid.is_error
    assert invalid.meta is not None
    assert invalid.meta["toolbridge/error"]["type"] == "ValidationError"
    assert len(calls(faces_dir)) == 1, "invalid arguments never reach the tool"

    for bad_run in ("", "x" * 201, "tab\there"):
        refused_run = await client.call_tool("lookup", {"sku": "A1"}, meta=run(bad_run))
        assert refused_run.is_error
        assert refused_run.meta is not None
        assert refused_run.meta["toolbridge/error"]["type"] == "InvalidArgument"
    assert len(calls(faces_dir)) == 1, "a refused run id runs nothing"

    unknown = await client.call_tool("payroll", {})
    assert unknown.is_error
    assert unknown.meta is not None
    assert unknown.meta["toolbridge/error"]["type"] == "ToolNotFound"


async def test_stdio_lists_calls_fails_and_replays(faces_dir: Path) -> None:
    async with stdio(faces_dir) as client:
        await check_calls(client, faces_dir)


async def test_stdio_retry_of_a_timed_out_call_does_not_run_it_twice(faces_dir: Path) -> None:
    async with stdio(faces_dir) as client:
        with pytest.raises(MCPError):
            await client.call_tool("slow", {"sku": "S1"}, read_timeout_seconds=0.5, meta=run("slow-1"))
        # The client gave up; the call goes on in the server. Let it finish, then retry.
        await open_gate(faces_dir)
        result = await client.call_tool("slow", {"sku": "S1"}, meta=run("slow-1"))
        assert result.structured_content == {"sku": "S1", "stock": 0}
    assert calls(faces_dir) == ["slow S1"]


async def test_stdio_long_call_sends_progress_while_it_runs(faces_dir: Path) -> None:
    seen: list[tuple[float, str | None]] = []
    gate_opened: asyncio.Task[None] | None = None

    class Progress:
        async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
            nonlocal gate_opened
            seen.append((progress, message))
            if gate_opened is None:
                gate_opened = asyncio.ensure_future(open_gate(faces_dir))

    progress = Progress()

    async with stdio(faces_dir, "--progress-every", "0.05") as client:
        result = await asyncio.wait_for(
            client.call_tool("slow", {"sku": "P1"}, progress_callback=progress), WAIT
        )
    assert gate_opened is not None
    await gate_opened
    assert not result.is_error
    assert seen, "no progress notification arrived while the call ran"
    assert seen[0][1] is not None
    assert seen[0][1].startswith("slow: running for")


async def test_an_mcp_call_is_journaled_like_a_grpc_call(faces_dir: Path) -> None:
    async with stdio(faces_dir) as client:
        await client.call_tool("lookup", {"sku": "J1"}, meta=run("over-mcp"))
    async with Bridge(journal=faces_dir / "journal.db") as bridge, bridge.run("over-grpc") as step:
        await step.sandbox.python(
            "agent", 'return await tools.lookup(sku="J1")', tools={"lookup": TOOLS["lookup"]}
        )
    (mcp_row,) = await steps_of(faces_dir, "over-mcp")
    grpc_row = next(s for s in await steps_of(faces_dir, "over-grpc") if s.kind == "tool")

    def shape(rec: StepRecord) -> dict[str, Any]:
        return {
            "key": rec.key.rsplit("/", 1)[-1],
            "kind": rec.kind,
            "name": rec.name,
            "status": rec.status,
            "input": rec.input_json,
            "output": rec.output_json,
            "error": rec.error,
            "attempts": rec.attempts,
            "entries": [sorted(entry) for entry in rec.attempt_log],
        }

    assert shape(mcp_row) == shape(grpc_row)
    assert mcp_row.parent_key is None
    assert grpc_row.parent_key == "agent"


async def test_http_lists_calls_fails_and_replays(faces_dir: Path) -> None:
    async with http_server(faces_dir, "127.0.0.1:0") as (url, token), bearer_client(url, token) as client:
        assert url.startswith("http://127.0.0.1:")
        assert url.endswith("/mcp")
        await check_calls(client, faces_dir)


def _status(url: str, token: str | None = None) -> int:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=WAIT) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


async def toolbridge(faces_dir: Path, *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE, *args, cwd=REPO, env=app_env(faces_dir), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 0
    return out.decode()


async def test_http_on_loopback_needs_the_bearer_token_it_printed(faces_dir: Path) -> None:
    # Any local process reaches loopback (a sandbox under the process launcher among them):
    # without the token it printed, the server answers nothing, lists nothing, calls nothing.
    async with http_server(faces_dir, "127.0.0.1:0") as (url, token):
        assert token.startswith("tbm1.")
        assert await asyncio.to_thread(_status, url) == 401
        assert await asyncio.to_thread(_status, url, "tbm1.guess") == 401
        assert await asyncio.to_thread(_status, url, token[:-1]) == 401
        assert await asyncio.to_thread(_status, url, token) == 200
    assert calls(faces_dir) == []


async def test_http_no_auth_is_explicit_and_loopback_only(faces_dir: Path) -> None:
    async with http_server(faces_dir, "127.0.0.1:0", "--no-auth") as (url, token):
        assert token == ""
        assert await asyncio.to_thread(_status, url) == 200
    for args, said in (
        (["--http", "0.0.0.0:0", "--no-auth"], "is not a loopback address"),
        (["--no-auth"], "--no-auth is for --http"),
    ):
        process = await asyncio.create_subprocess_exec(
            TOOLBRIDGE, "mcp", TARGET, *args, cwd=REPO, env=app_env(faces_dir), stderr=asyncio.subprocess.PIPE
        )
        _, err = await asyncio.wait_for(process.communicate(), WAIT)
        assert process.returncode == 2, args
        assert said in err.decode()


async def test_http_off_loopback_needs_a_sidecar_token_and_keeps_to_its_grant(faces_dir: Path) -> None:
    minted = json.loads(
        await toolbridge(faces_dir, "token", "mint", TARGET, "--run", "tok-run", "--tool", "lookup", "--json")
    )
    token = minted["token"]
    async with http_server(faces_dir, "0.0.0.0:0", "--insecure") as (url, _):  # TLS: tests/hosts
        local = "http://127.0.0.1:" + url.rsplit(":", 1)[1]
        assert await asyncio.to_thread(_status, local) == 401
        assert await asyncio.to_thread(_status, local, "tb1.nope.nope") == 401
        assert await asyncio.to_thread(_status, local, token) == 200

        http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"})
        async with http, Client(streamable_http_client(local, http_client=http)) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["lookup"]
            other = await client.call_tool("refuse", {"sku": "A1"})
            assert other.is_error
            assert other.meta is not None
            assert other.meta["toolbridge/error"]["type"] == "ToolNotFound"
            elsewhere = await client.call_tool("lookup", {"sku": "A1"}, meta=run("not-mine"))
            assert elsewhere.is_error
            assert elsewhere.meta is not None
            assert elsewhere.meta["toolbridge/error"]["type"] == "Unauthenticated"
            mine = await client.call_tool("lookup", {"sku": "A1"}, meta=run("tok-run"))
            assert mine.structured_content == {"sku": "A1", "stock": 7}

        await toolbridge(faces_dir, "token", "revoke", TARGET, minted["id"])
        assert await asyncio.to_thread(_status, local, token) == 401, "a revoked token stops at once"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--http", "nowhere"], "expected HOST:PORT"),
        (["--http", "127.0.0.1:99999"], "expected HOST:PORT"),
        (["--progress-every", "0"], "--progress-every must be a positive number"),
    ],
)
async def test_bad_options_are_refused_with_what_to_pass(faces_dir: Path, args: list[str], said: str) -> None:
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE, "mcp", TARGET, *args, cwd=REPO, env=app_env(faces_dir), stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 2
    assert said in err.decode()
