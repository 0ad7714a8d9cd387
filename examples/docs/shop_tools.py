# docs-sample: run by tests/e2e/test_cli_tools.py
"""The module `toolbridge call` and `toolbridge definitions` load as shop_tools:bridge."""

from typing import Any

from pydantic import BaseModel, Field

from toolbridge import Bridge, tool

CUSTOMERS: dict[str, dict[str, Any]] = {"cus_1": {"name": "Acme", "seats": 12}}


class CustomerId(BaseModel):
    id: str = Field(description="The customer's id, like cus_1")


get_customer = tool.step(
    description="Look up a customer by ID",
    input=CustomerId,
    run=lambda args: CUSTOMERS[args.id],
)

bridge = Bridge(journal="shop.db", tools={"getCustomer": get_customer})


@bridge.tool
def search_customers(query: str, limit: int = 10) -> list[str]:
    """Search customers by name.

    Args:
        query: Part of the name to look for.
        limit: Most results to return.
    """
    found = [key for key, customer in CUSTOMERS.items() if query.lower() in customer["name"].lower()]
    return found[:limit]
