"""Sidecar mode through the host API: a sandbox started outside the daemon, with a minted token.

The "sandbox" is a separate Python process given only TOOLBRIDGE_ADDRESS and TOOLBRIDGE_TOKEN,
as a container or a remote VM would be.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc import aio

from inngest_tools._proto import toolbridge_pb2 as pb
from inngest_tools._proto import toolbridge_pb2_grpc as pb_grpc
from tests.helpers import client_elsewhere
from toolbridge import Bridge, SidecarToken, ToolbridgeError

CLIENT = """
import asyncio, json, sys
from inngest_tools import tools, ToolError

async def main():
    # One event loop, so every call travels on the same stream.
    for name, args in json.loads(sys.argv[1]):
        try:
            print(json.dumps({"result": await tools[name](*args)}), flush=True)
        except ToolError as exc:
            print(json.dumps({"error": exc.type}), flush=True)

asyncio.run(main())
"""

WAIT = 60.0


async def sandbox_elsewhere(
    tmp_path: Path, address: str, token: str, calls: list[tuple[str, list[Any]]]
) -> list[dict[str, Any]]:
    """Run the client in its own process, as a sandbox the daemon did not start."""
    return await client_elsewhere(tmp_path, CLIENT, json.dumps(calls), address, token, timeout=WAIT)


class Inventory:
    def __init__(self) -> None:
        self.lookups: list[str] = []

    def lookup(self, sku: str) -> dict[str, Any]:
        self.lookups.append(sku)
        return {"sku": sku, "stock": 7}


@pytest.fixture
def inventory() -> Inventory:
    return Inventory()


@pytest.fixture
async def sidecar(journal_path: Path, inventory: Inventory) -> AsyncIterator[Bridge]:
    bridge = Bridge(journal=journal_path, tools={"lookup": inventory.lookup})

    @bridge.tool
    def payroll() -> str:
        return "not for the sidecar"

    async with bridge:
        yield bridge


async def test_a_minted_token_serves_its_tools_to_a_sandbox_started_elsewhere(
    sidecar: Bridge, inventory: Inventory, tmp_path: Path
) -> None:
    minted = await sidecar.mint_token(run_id="vm-7", tools=["lookup"], max_calls=10, ttl=600)
    assert minted.token is not None
    answers = await sandbox_elsewhere(
        tmp_path, sidecar.address, minted.token, [("lookup", ["sku-1"]), ("payroll", [])]
    )
    assert answers == [{"result": {"sku": "sku-1", "stock": 7}}, {"error": "ToolNotFound"}]
    assert inventory.lookups == ["sku-1"]


async def test_calls_are_journaled_steps_of_the_tokens_run_and_replay(
    journal_path: Path, inventory: Inventory, tmp_path: Path
) -> None:
    async with Bridge(journal=journal_path, tools={"lookup": inventory.lookup}) as bridge:
        minted = await bridge.mint_token(run_id="vm-7", tools=["lookup"], ttl=600)
        assert minted.token is not None
        first = await sandbox_elsewhere(tmp_path, bridge.address, minted.token, [("lookup", ["sku-1"])])
    # A restarted daemon on the same journal answers the same call from the journal.
    async with Bridge(journal=journal_path, tools={"lookup": inventory.lookup}) as bridge:
        again = await sandbox_elsewhere(tmp_path, bridge.address, minted.token, [("lookup", ["sku-1"])])
    assert first == again == [{"result": {"sku": "sku-1", "stock": 7}}]
    assert inventory.lookups == ["sku-1"]
    with sqlite3.connect(journal_path) as db:
        steps = db.execute(
            "SELECT step_key, parent_key, kind, status FROM steps WHERE run_id = 'vm-7'"
        ).fetchall()
    parent = f"sidecar-{minted.id}"
    assert (parent, None, "sidecar", "completed") in steps
    assert any(
        parent_key == parent and kind == "tool" and status == "completed"
        for _, parent_key, kind, status in steps
    )


async def test_a_revoked_token_is_refused_even_on_an_open_stream(sidecar: Bridge, tmp_path: Path) -> None:
    minted: SidecarToken | None = None

    async def revoke_me() -> str:
        assert minted is not None
        assert await sidecar.revoke_token(minted.id)
        return "revoked"

    sidecar.tool("revoke_me")(revoke_me)
    minted = await sidecar.mint_token(run_id="vm-8", tools=["lookup", "revoke_me"], ttl=600)
    assert minted.token is not None
    answers = await sandbox_elsewhere(
        tmp_path,
        sidecar.address,
        minted.token,
        [("lookup", ["a"]), ("revoke_me", []), ("lookup", ["b"])],
    )
    assert answers == [
        {"result": {"sku": "a", "stock": 7}},
        {"result": "revoked"},
        {"error": "Unauthenticated"},
    ]
    assert not await sidecar.revoke_token(minted.id)  # already revoked
    (listed,) = [token for token in await sidecar.list_tokens() if token.id == minted.id]
    assert listed.revoked_at is not None
    assert listed.token is None  # secrets are never listed


async def test_an_expired_token_is_refused(
    sidecar: Bridge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    minted = await sidecar.mint_token(run_id="vm-9", tools=["lookup"], ttl=60)
    assert minted.token is not None
    later = time.time() + 61
    monkeypatch.setattr("toolbridge._server.sidecar.now", lambda: later)
    answers = await sandbox_elsewhere(tmp_path, sidecar.address, minted.token, [("lookup", ["a"])])
    assert answers == [{"error": "Unauthenticated"}]
    assert not minted.active(at=later)


async def test_the_call_budget_holds_across_daemon_restarts(
    journal_path: Path, inventory: Inventory, tmp_path: Path
) -> None:
    async with Bridge(journal=journal_path, tools={"lookup": inventory.lookup}) as bridge:
        minted = await bridge.mint_token(run_id="vm-10", tools=["lookup"], max_calls=2, ttl=600)
        assert minted.token is not None
        first = await sandbox_elsewhere(
            tmp_path, bridge.address, minted.token, [("lookup", ["a"]), ("lookup", ["b"]), ("lookup", ["c"])]
        )
    async with Bridge(journal=journal_path, tools={"lookup": inventory.lookup}) as bridge:
        later = await sandbox_elsewhere(tmp_path, bridge.address, minted.token, [("lookup", ["d"])])
        (listed,) = await bridge.list_tokens()
    assert first[:2] == [{"result": {"sku": "a", "stock": 7}}, {"result": {"sku": "b", "stock": 7}}]
    assert first[2] == later[0] == {"error": "MaxCallsExceeded"}
    assert inventory.lookups == ["a", "b"]
    assert listed.calls == 2  # the budget spent: refused calls are counted by nobody


async def test_only_a_hash_of_the_secret_is_stored(sidecar: Bridge, journal_path: Path) -> None:
    minted = await sidecar.mint_token(run_id="vm-11", tools=["lookup"], ttl=600)
    assert minted.token is not None
    secret = minted.token.split(".")[2]
    await sidecar.aclose()
    for path in journal_path.parent.glob(journal_path.name + "*"):
        assert secret.encode() not in path.read_bytes()


async def test_minting_refuses_what_it_cannot_grant(sidecar: Bridge, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no registered tool named 'nope'"):
        await sidecar.mint_token(run_id="r", tools=["lookup", "nope"])
    with pytest.raises(ValueError, match="at least one tool"):
        await sidecar.mint_token(run_id="r", tools=[])
    with pytest.raises(TypeError, match="list of tool names"):
        await sidecar.mint_token(run_id="r", tools="lookup")
    with pytest.raises(ValueError, match="max_calls"):
        await sidecar.mint_token(run_id="r", tools=["lookup"], max_calls=0)
    with pytest.raises(ValueError, match="ttl"):
        await sidecar.mint_token(run_id="r", tools=["lookup"], ttl=31 * 24 * 3600)
    with pytest.raises(ValueError, match="invalid run id"):
        await sidecar.mint_token(run_id="", tools=["lookup"])
    async with Bridge(journal=None, tools={"lookup": lambda: 1}) as unjournaled:
        with pytest.raises(ToolbridgeError, match="kept in the journal"):
            await unjournaled.mint_token(run_id="r", tools=["lookup"])
    closed = Bridge(journal=tmp_path / "closed.db", tools={"lookup": lambda: 1})
    with pytest.raises(ToolbridgeError, match="not open"):
        await closed.mint_token(run_id="r", tools=["lookup"])


async def test_a_stream_with_a_bad_token_answers_every_call_and_stays_open(sidecar: Bridge) -> None:
    async with aio.insecure_channel(sidecar.address) as channel:
        stream = pb_grpc.ToolBridgeServiceStub(channel).CallToolStream(
            metadata=(("x-toolbridge-token", "tb1.0123456789abcdef.forged"),)
        )
        codes = []
        for call_id in (1, 2, 3):
            await stream.write(
                pb.CallToolStreamRequest(call_id=call_id, call=pb.CallToolRequest(tool_name="lookup"))
            )
            answer = await asyncio.wait_for(stream.read(), WAIT)
            codes.append((answer.call_id, answer.WhichOneof("answer"), answer.status.code))
        await stream.done_writing()
        assert await stream.code() == grpc.StatusCode.OK
    unauthenticated = grpc.StatusCode.UNAUTHENTICATED.value[0]
    assert codes == [
        (1, "status", unauthenticated),
        (2, "status", unauthenticated),
        (3, "status", unauthenticated),
    ]
