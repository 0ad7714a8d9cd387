# A sandboxed agent whose big refunds wait for a person.
import asyncio

from inngest_tools import ToolError, tools


async def main():
    account = await tools.ask_user(question="Refund order 42 to which account?")
    try:
        receipt = await tools.refund(order_id=42, amount=500, account=account)
        print("refunded:", receipt)
    except ToolError as error:  # ApprovalRejected or ApprovalExpired: the tool did not run
        print("not refunded:", error.type, error.message)


asyncio.run(main())
