"""Lifecycle hooks and errors: change the input, refuse a call, change the result."""

import asyncio
from typing import Any

from pydantic import BaseModel

from toolbridge import Bridge, ToolError, tool


class Transfer(BaseModel):
    amount: int
    currency: str


# --8<-- [start:raise]
def do_transfer(args: Transfer) -> dict[str, Any]:
    if args.amount > 1000:
        # A ToolError of your own reaches the sandbox as it is: type, message, retryable.
        raise ToolError("transfers above 1000 need a person", type="NeedsApproval")
    return {"amount": args.amount, "currency": args.currency}


# --8<-- [end:raise]


def add_receipt(result: dict[str, Any]) -> dict[str, Any]:
    return {**result, "receipt": "r-1"}


# --8<-- [start:hooks]
transfer = tool.step(
    input=Transfer,
    run=do_transfer,
    on_start=lambda given: {**given, "currency": given["currency"].upper()},  # may change the input
    on_finish=add_receipt,  # may change the result
)
# --8<-- [end:hooks]

SNIPPET = """
done = await tools.transfer(amount=1, currency="eur")
try:
    await tools.transfer(amount=5000, currency="eur")
except ToolError as error:
    refused = [error.type, error.message, error.retryable]
return [done, refused]
"""


async def main() -> None:
    async with Bridge(journal="toolbridge.db") as bridge, bridge.run("hooks-1") as step:
        done, refused = await step.sandbox.python("pay", SNIPPET, tools={"transfer": transfer})
    assert done == {"amount": 1, "currency": "EUR", "receipt": "r-1"}, done
    assert refused == ["NeedsApproval", "transfers above 1000 need a person", False], refused


asyncio.run(main())
