"""Errors name the caller: a sidecar token's calls come from no command, so no "this command"."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc

from tests.helpers import HeldCommand, call_request, raw_call, raw_status, result_of
from toolbridge import Bridge


async def test_a_sidecar_tokens_errors_name_the_token(journal_path: Path) -> None:
    async with Bridge(journal=journal_path, tools={"lookup": lambda sku: sku}) as bridge:
        minted = await bridge.mint_token(run_id="vm-1", tools=["lookup"], max_calls=1, ttl="10m")
        assert minted.token is not None
        held = HeldCommand(bridge.address, minted.token, asyncio.ensure_future(asyncio.sleep(0)))  # type: ignore[arg-type]
        unknown = await raw_status(held, call_request("payroll", b"[]"))
        first = await raw_call(held, call_request("lookup", b'["a"]'))
        over = await raw_call(held, call_request("lookup", b'["b"]'))
        await held.result
    assert unknown.code() == grpc.StatusCode.NOT_FOUND
    assert unknown.details() == f"no tool named 'payroll' for sidecar token {minted.id}"
    assert result_of(first) == "a"
    assert over.error.type == "MaxCallsExceeded"
    assert over.error.message == f"sidecar token {minted.id} made more than 1 tool calls; it may make no more"
