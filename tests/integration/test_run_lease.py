"""Two bridges in one process on one journal: the lease is renewed while a run is open."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import grpc
import pytest
from grpc import aio

from inngest_tools._proto import toolbridge_pb2 as pb
from inngest_tools._proto import toolbridge_pb2_grpc as pb_grpc
from tests.helpers import WAIT, wait_until
from toolbridge import Bridge, RunBusyError

LEASE = 0.3


def lease_expiry(journal_path: Path, run_id: str) -> float | None:
    with sqlite3.connect(journal_path) as db:
        (expires,) = db.execute("SELECT lease_expires_at FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if expires is None else float(expires) / 1000


async def test_an_open_run_stays_its_holders_past_one_lease(journal_path: Path) -> None:
    async with Bridge(journal=journal_path, run_lease=LEASE) as holder, Bridge(journal=journal_path) as other:
        async with holder.run("r"):
            first = lease_expiry(journal_path, "r")
            assert first is not None
            # Renewed in the background: the first lease has run out, and the run is still held.
            await wait_until(
                lambda: time.time() > first and (lease_expiry(journal_path, "r") or 0) > time.time()
            )
            with pytest.raises(RunBusyError, match="is held by"):
                async with other.run("r", wait=0):
                    pass
        # Left: the lease is released, and the other bridge enters at once.
        assert lease_expiry(journal_path, "r") is None
        async with other.run("r"):
            pass


@pytest.mark.parametrize("lease", [0, -1, float("inf"), float("nan"), True, "30", "30 s"])
def test_run_lease_must_be_a_positive_number_of_seconds(journal_path: Path, lease: object) -> None:
    with pytest.raises(ValueError, match="run_lease="):
        Bridge(journal=journal_path, run_lease=lease)  # type: ignore[arg-type]


async def test_a_sidecar_token_whose_run_another_bridge_holds_is_answered_unavailable(
    journal_path: Path,
) -> None:
    tools = {"lookup": lambda: 1}
    # The sidecar waits a little over its own lease for the live holder, then answers.
    sidecar_bridge = Bridge(journal=journal_path, tools=tools, run_lease=LEASE)
    async with Bridge(journal=journal_path) as holder, sidecar_bridge as sidecar:
        minted = await sidecar.mint_token(run_id="vm", tools=["lookup"], ttl=600)
        assert minted.token is not None
        async with holder.run("vm"), aio.insecure_channel(sidecar.address) as channel:
            stream = pb_grpc.ToolBridgeServiceStub(channel).CallToolStream(
                metadata=(("x-toolbridge-token", minted.token),)
            )
            await stream.write(
                pb.CallToolStreamRequest(call_id=1, call=pb.CallToolRequest(tool_name="lookup"))
            )
            answer = await asyncio.wait_for(stream.read(), WAIT)
            await stream.done_writing()
        assert answer.status.code == grpc.StatusCode.UNAVAILABLE.value[0]
        assert "run 'vm' is held by" in answer.status.message
