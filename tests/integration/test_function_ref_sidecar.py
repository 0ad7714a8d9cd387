"""A ``function_ref`` registered for sidecar sandboxes resolves on the daemon serving the token."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.helpers import HeldCommand, call_request, raw_call, result_of
from toolbridge import Bridge, FunctionContext, function_ref


async def test_a_sidecar_call_of_a_reference_runs_the_function_declared_on_the_serving_bridge(
    journal_path: Path,
) -> None:
    async with Bridge(journal=journal_path, tools={"refund": function_ref("refund")}) as bridge:

        @bridge.function(id="refund")
        async def refund(ctx: FunctionContext) -> dict[str, Any]:
            return {"refunded": ctx.event.data["order_id"], "run": ctx.run_id}

        minted = await bridge.mint_token(run_id="vm-2", tools=["refund"], ttl="5m")
        assert minted.token is not None
        held = HeldCommand(bridge.address, minted.token, asyncio.ensure_future(asyncio.sleep(0)))  # type: ignore[arg-type]
        answer = await raw_call(held, call_request("refund", b"", b'{"order_id": "o9"}'))
        await held.result
    assert result_of(answer) == {"refunded": "o9", "run": "vm-2"}
