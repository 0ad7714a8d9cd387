"""A call outlives its connection's age: a person may take hours to decide.

The daemon tells a connection to go away once it is ``MAX_CONNECTION_AGE`` old, and a client
cannot move a call in flight to another connection. With a grace period after that (900 s
once), a call waiting for a person past it failed ``Unavailable: max connection age``, in
both clients, though its command's ``approval_hold`` allowed the wait. Here the age is a
fifth of a second and the person decides after several ages: the call gets its result, and
the command's next call goes on a new connection.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import BaseModel

from tests.helpers import WAIT
from toolbridge import Bridge, ToolOptions, tool
from toolbridge._server import transport

AGE = 0.2

AGENTS = {
    "python": (
        "agent.py",
        """
        import asyncio, json
        from inngest_tools import tools

        async def main():
            first = await tools.refund(order_id=1)
            second = await tools.refund(order_id=2)
            print(json.dumps([first, second]))

        asyncio.run(main())
        """,
    ),
    "node": (
        "agent.js",
        """
        const { tools } = require("inngest_tools");
        (async () => {
          const first = await tools.refund({ order_id: 1 });
          const second = await tools.refund({ order_id: 2 });
          console.log(JSON.stringify([first, second]));
        })();
        """,
    ),
}


class Refund(BaseModel):
    order_id: int


def test_a_connection_told_to_go_away_keeps_its_calls_until_they_end() -> None:
    options = dict(transport.server_options(max_request_bytes=1024, connection_idle=60))
    assert options["grpc.max_connection_age_ms"] == round(transport.MAX_CONNECTION_AGE * 1000)
    assert "grpc.max_connection_age_grace_ms" not in options  # gRPC's default: no limit


@pytest.mark.parametrize("language", sorted(AGENTS))
async def test_a_call_waiting_for_a_person_outlives_its_connections_age(
    bridge: Bridge,
    script: Callable[[str, str], Path],
    monkeypatch: pytest.MonkeyPatch,
    language: str,
) -> None:
    monkeypatch.setattr(transport, "MAX_CONNECTION_AGE", AGE)  # read when the door opens
    name, code = AGENTS[language]
    path = script(name, code)
    refund = tool.step(
        input=Refund,
        run=lambda args: {"refunded": args.order_id},
        requires_confirmation=lambda args, ctx: args.order_id == 1,
    )

    async def run() -> str:
        async with bridge.run(f"age-{language}") as step:
            result = await step.sandbox.commands.run(
                "agent",
                ["python3" if language == "python" else "node", str(path)],
                tools={"refund": refund},
                tool_options=ToolOptions(approval_hold=WAIT),
                cwd=path.parent,
            )
        assert result.exit_code == 0, result.stderr
        return result.stdout

    command = asyncio.create_task(run())
    async with asyncio.timeout(WAIT):
        while not (pending := await bridge.approvals.list()):  # noqa: ASYNC110 - nothing announces it
            await asyncio.sleep(0.01)
    # The scenario is the clock: the connection carrying the waiting call is told to go away
    # one age after it opened, and the decision comes several ages later.
    await asyncio.sleep(5 * AGE)
    await bridge.approvals.approve(pending[0].id, by="test")
    stdout = await asyncio.wait_for(command, WAIT)
    assert json.loads(stdout) == [{"refunded": 1}, {"refunded": 2}]
