"""Item 2 (in part): a command's calls in flight are limited; the next is refused, with when to retry."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from tests.helpers import (
    WAIT,
    Blocker,
    call_request,
    held_command,
    raw_call,
    raw_status,
    result_of,
    wait_until,
)
from toolbridge import Bridge, ToolOptions


async def test_a_call_past_max_in_flight_gets_resource_exhausted_and_other_commands_are_unaffected(
    bridge: Bridge, tmp_path: Path
) -> None:
    blocker = Blocker()
    flooded_dir, other_dir = tmp_path / "flooded", tmp_path / "other"
    flooded_dir.mkdir()
    other_dir.mkdir()
    # The held command's own `hold` call is in flight throughout: two more fill its three slots.
    options = ToolOptions(max_in_flight=3)
    tools = blocker.tools
    async with (
        held_command(bridge, flooded_dir, tools, run_id="flood", tool_options=options) as flooded,
        held_command(bridge, other_dir, tools, run_id="other", tool_options=options) as other,
    ):
        blocked = [asyncio.ensure_future(raw_call(flooded, call_request("block"))) for _ in range(2)]
        await wait_until(lambda: blocker.entered == 2)
        refused = await raw_status(flooded, call_request("ping"))
        assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "already has 3 tool calls in flight" in str(refused.details())
        assert "retry in 100 ms" in str(refused.details())
        assert result_of(await raw_call(other, call_request("ping"))) == "pong"  # its own slots
        blocker.release.set()
        assert [
            result_of(response) for response in await asyncio.wait_for(asyncio.gather(*blocked), WAIT)
        ] == [
            "done",
            "done",
        ]
        assert result_of(await raw_call(flooded, call_request("ping"))) == "pong"  # slots are back
    result = await asyncio.wait_for(asyncio.shield(flooded.result), WAIT)
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("value", [0, -1, 1.5])
def test_max_in_flight_must_be_a_whole_number_of_at_least_one(value: object) -> None:
    with pytest.raises(ValueError, match="max_in_flight"):
        ToolOptions(max_in_flight=value)  # type: ignore[arg-type]
