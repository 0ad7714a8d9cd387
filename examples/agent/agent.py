# The sandboxed side of the demo: code that could have been written by a model. It sees no
# keys and no database; it calls the host's tools by name.
import asyncio

from inngest_tools import ToolError, tools


async def main():
    customer = await tools.getCustomer(id="cus_1")
    print(f"customer: {customer['name']} ({customer['seats']} seats)")

    invoices = await tools.listInvoices("cus_1")
    listed = ", ".join(f"{invoice['id']} ({invoice['amount']})" for invoice in invoices)
    print(f"invoices: {listed}")

    try:
        await tools.getCustomer(id=42)
    except ToolError as error:
        print(f"refused as expected: {error.type}")

    # Above 1000, a refund waits for a person's approval (the sandbox cannot give it).
    try:
        refund = await tools.refund(invoice_id="inv_2", amount=5000)
        print(f"refund of 5000: {refund['status']}")
    except ToolError as error:
        print(f"refund refused: {error.type}: {error.message}")


asyncio.run(main())
