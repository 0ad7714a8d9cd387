"""Human in the loop: a sandboxed agent whose big refunds wait for a person.

    python examples/human_in_the_loop.py            # then, in another terminal:
    toolbridge approvals list --journal hitl.db
    toolbridge approvals approve apr_... --journal hitl.db --reason "checked the order"

    python examples/human_in_the_loop.py --auto     # approves in-process, for a quick look

The agent asks which account to refund to (``ask_user``), looks the order up, and refunds it.
``refund`` needs a person only above 100: ``requires_confirmation`` decides per call, on the
validated arguments. Run it again with the same run id and everything replays from the journal.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel

from toolbridge import Bridge, RunWaiting, ToolOptions, ask_user, tool

AGENT = """
import asyncio
from inngest_tools import ToolError, tools

async def main():
    account = await tools.ask_user(question="Refund order 42 to which account?")
    order = await tools.lookup_order(order_id=42)
    try:
        receipt = await tools.refund(order_id=42, amount=order["total"], account=account)
        print("refunded:", receipt)
    except ToolError as error:  # ApprovalRejected or ApprovalExpired: it did not run
        print("not refunded:", error.type, error.message)

asyncio.run(main())
"""


class OrderId(BaseModel):
    order_id: int


class Refund(BaseModel):
    order_id: int
    amount: int
    account: str


lookup_order = tool.step(
    name="lookup_order",
    description="Look an order up by its id",
    input=OrderId,
    run=lambda args: {"order_id": args.order_id, "total": 250},
)
refund = tool.step(
    name="refund",
    description="Refund an order to an account",
    input=Refund,
    run=lambda args, ctx: {"refunded": args.amount, "to": args.account, "receipt": ctx.idempotency_key},
    requires_confirmation=lambda args, ctx: args.amount > 100,  # a person decides the big ones
)


async def decide_in_process(bridge: Bridge) -> None:
    """What --auto does: answer and approve from host code (a real app asks a person)."""
    decided = 0
    while decided < 2:
        for req in await bridge.approvals.list():
            print(f"  {req.id}: {req.kind}: {req.summary}")
            if req.kind == "input":
                await bridge.approvals.answer(req.id, "savings", by="example")
            else:
                await bridge.approvals.approve(req.id, by="example", reason="looks right")
            decided += 1
        await asyncio.sleep(0.05)


async def main(auto: bool) -> None:
    work = Path(tempfile.mkdtemp())
    (work / "agent.py").write_text(AGENT)
    async with Bridge(journal="hitl.db") as bridge:
        deciding = asyncio.create_task(decide_in_process(bridge)) if auto else None
        if not auto:
            print("waiting for a person: toolbridge approvals list --journal hitl.db")
        try:
            async with bridge.run("refund-order-42") as step:
                result = await step.sandbox.commands.run(
                    "agent",
                    ["python3", "agent.py"],
                    tools=[lookup_order, refund, ask_user()],
                    tool_options=ToolOptions(approval_hold=600),
                    cwd=work,
                )
            print(result.stdout, end="")
        except RunWaiting as waiting:  # nobody decided within approval_hold: run this again later
            print(waiting)
        finally:
            if deciding is not None:
                deciding.cancel()


if __name__ == "__main__":
    asyncio.run(main(auto="--auto" in sys.argv))
