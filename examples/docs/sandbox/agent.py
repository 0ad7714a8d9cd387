# The sandbox side: code a model could have written. It sees no key and no database; it
# calls the host's tools by name through inngest_tools, which the sandbox already has.
import asyncio

from inngest_tools import ToolError, tools


async def main():
    customer = await tools.getCustomer(id="cus_1")  # a tool.step: named, validated arguments
    invoices = await tools.listInvoices("cus_1")  # a plain function: positional arguments
    print(f"{customer['name']}: {len(invoices)} invoices")
    try:
        await tools.getCustomer(id=42)
    except ToolError as error:
        print(error.type, error.message)  # ValidationError invalid arguments: /id: ...


asyncio.run(main())
