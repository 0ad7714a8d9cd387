"""Human in the loop: a refund above 100 waits for a person's approval, durably."""

import asyncio
from pathlib import Path

from pydantic import BaseModel

from toolbridge import ApprovalError, Bridge, RunWaiting, ToolContext, ToolOptions, ask_user, tool

SANDBOX = Path(__file__).parent / "sandbox"
refunds: list[int] = []


# --8<-- [start:tool]
class Refund(BaseModel):
    order_id: int
    amount: int
    account: str


def issue_refund(args: Refund, ctx: ToolContext) -> dict[str, object]:
    refunds.append(args.amount)  # payments.refund(..., key=ctx.idempotency_key) in real life
    return {"order_id": args.order_id, "refunded": args.amount, "to": args.account}


refund = tool.step(
    name="refund",
    input=Refund,
    run=issue_refund,
    requires_confirmation=lambda args, ctx: args.amount > 100,  # decided per call
)
# --8<-- [end:tool]


async def main() -> None:
    # --8<-- [start:run]
    async with Bridge(journal="hitl.db") as bridge:
        decided: list[str] = []
        while True:
            try:
                async with bridge.run("refund-order-42") as step:
                    result = await step.sandbox.commands.run(
                        "agent",
                        "python3 refund_agent.py",
                        cwd=SANDBOX,
                        tools=[refund, ask_user()],  # a list of named tools
                        tool_options=ToolOptions(approval_hold=0.5, approval_timeout=86400),
                    )
                break
            except RunWaiting as waiting:  # nobody decided within approval_hold
                for request in waiting.requests:  # a person would decide these, in any process
                    print("waiting:", request.id, request.kind, request.summary)
                    if request.kind == "input":
                        await bridge.approvals.answer(request.id, "savings", by="alice")
                    else:
                        await bridge.approvals.approve(request.id, by="alice", reason="checked")
                    decided.append(request.id)
                # ... then enter the run again: done calls replay, the approved one runs once
        print(result.stdout)
        # --8<-- [end:run]

        # --8<-- [start:decide]
        assert await bridge.approvals.list(run_id="refund-order-42") == []  # pending, oldest first
        try:  # of two people deciding, one wins: a decision is a compare-and-swap in the journal
            await bridge.approvals.reject(decided[-1], by="bob", reason="too much")
        except ApprovalError as error:
            print(error)  # request apr_... was already decided: approved by alice via api at ...
        # --8<-- [end:decide]
    assert "refunded: {'order_id': 42, 'refunded': 500, 'to': 'savings'}" in result.stdout, result.stdout
    assert refunds == [500], refunds


asyncio.run(main())
