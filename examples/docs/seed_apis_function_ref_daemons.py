"""function_ref across daemons: a tool on daemon A runs the function that only daemon B declares."""

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from toolbridge import Bridge, FunctionContext, event_type, function_ref


class OrderRefund(BaseModel):
    orderId: str  # noqa: N815 (the seed's field name)
    amount: int


CALL = """
try:
    return await tools.refund(orderId="o1", amount=ARGS)
except ToolError as error:
    return error.type
"""


# --8<-- [start:daemons]
def daemon_b(journal: str) -> Bridge:
    """Billing's daemon: the only one that declares (and serves) refund."""
    bridge = Bridge(journal=journal)

    @bridge.function(id="refund", trigger=event_type("order/refund", schema=OrderRefund))
    async def refund(ctx: FunctionContext) -> dict[str, Any]:
        return {"refunded": ctx.event.data["orderId"], "run": ctx.run_id}

    return bridge


def daemon_a(journal: str) -> Bridge:
    """The agents' daemon: it names refund, and never imports billing's code."""
    return Bridge(journal=journal, tools={"refund": function_ref("refund")})


async def call(a: Bridge, run_id: str, amount: Any) -> Any:
    async with a.run(run_id) as step:
        return await step.sandbox.python("agent", f"ARGS = {amount!r}\n{CALL}", tools=a.tools)


async def main(journal: str) -> None:
    async with daemon_a(journal) as a:
        async with daemon_b(journal):  # open: it lists refund in the journal
            served = await call(a, "agent-1", 500)  # runs on B, as run "refund/inv_..."
            refused = await call(a, "agent-2", "lots")  # checked against B's schema, on A
        unserved = await call(a, "agent-3", 500)  # B closed: nobody serves refund now
    print(served, refused, unserved)
    assert served["refunded"] == "o1"
    assert served["run"].startswith("refund/inv_")
    assert (refused, unserved) == ("ValidationError", "FunctionNotFound")
    # --8<-- [end:daemons]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as work:
        asyncio.run(main(str(Path(work) / "journal.db")))
