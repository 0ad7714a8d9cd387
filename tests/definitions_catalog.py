"""Tools that exercise every part of a definition: the golden files are built from these.

Nested models, enums, optionals, lists, constraints (some of which OpenAI's strict mode
cannot carry), a tool without a schema, a JSON Schema dict, a recursive model, a tagged
union, a map, and plain functions read from their signature and docstring.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AnyUrl, BaseModel, ConfigDict, Field

from toolbridge import Tool, tool


class Priority(enum.Enum):
    """How soon the order ships."""

    LOW = "low"
    HIGH = "high"


class Address(BaseModel):
    street: str = Field(description="Street and number")
    postcode: str = Field(pattern=r"^[0-9]{5}$")
    country: Literal["DE", "FR", "US"] = "US"


class LineItem(BaseModel):
    sku: str = Field(min_length=3, max_length=12, description="Stock keeping unit")
    quantity: int = Field(ge=1, le=1000)
    unit_price: float = Field(gt=0, description="Price of one unit, in euros")


class CreateOrder(BaseModel):
    customer_id: str = Field(description="The customer who orders")
    items: list[LineItem] = Field(min_length=1, max_length=50)
    shipping: Address
    billing: Address | None = Field(None, description="Where the invoice goes, if not the shipping address")
    priority: Priority = Priority.LOW
    tags: set[str] = set()
    note: str | None = Field(None, max_length=500)
    website: AnyUrl | None = None
    deliver_after: datetime | None = None


class Order(BaseModel):
    id: str
    total: float


class Circle(BaseModel):
    kind: Literal["circle"]
    radius: float = Field(gt=0)


class Square(BaseModel):
    kind: Literal["square"]
    side: float = Field(gt=0)


class Draw(BaseModel):
    model_config = ConfigDict(title="Drawing")  # an explicit title is kept

    shape: Annotated[Circle | Square, Field(discriminator="kind")]
    label: str = Field("", title="Caption")


class Category(BaseModel):
    name: str
    children: list[Category] = []


REFUND_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "payment_id": {"type": "string", "pattern": "^pay_[A-Za-z0-9]+$"},
        "amount_cents": {"type": "integer", "minimum": 1},
        "reason": {"type": "string", "enum": ["duplicate", "fraudulent", "requested_by_customer"]},
    },
    "required": ["payment_id", "amount_cents"],
}


def search_customers(
    query: str,
    limit: int = 10,
    status: Literal["active", "churned"] | None = None,
    regions: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Search customers by name or email.

    Matches are ranked by how recently the customer was active.

    Args:
        query: Text to look for.
        limit: Most results to return.
        status: Only customers with this status.
        regions: Only customers in these regions.
    """
    return [{"query": query, "limit": limit, "status": status, "regions": regions}]


def tag_customer(customer_id: str, labels: dict[str, str]) -> dict[str, str]:
    """Attach labels to a customer.

    Args:
        customer_id: The customer to label.
        labels: Label name to label value.
    """
    return labels


def catalog() -> dict[str, object]:
    """Name -> tool, as a host would pass them."""
    return {
        "createOrder": tool.step(
            description="Create an order for a customer",
            input=CreateOrder,
            output=Order,
            run=lambda args: {"id": "ord_1", "total": 10.0},
            requires_confirmation=True,
        ),
        "searchCustomers": search_customers,
        "tagCustomer": tag_customer,
        "ping": tool.step(description="Check that the service answers", run=lambda args: "pong"),
        "refund": tool.step(
            description="Refund a payment",
            input=REFUND_INPUT,
            run=lambda args: {"refunded": args["amount_cents"]},
            requires_confirmation=True,
        ),
        "draw": tool.step(description="Draw a shape", input=Draw, output=int, run=lambda args: 1),
        "saveCategories": tool.step(
            description="Save a category tree", input=Category, strict=False, run=lambda args: None
        ),
    }


def catalog_tool(name: str) -> Tool:
    """One tool of the catalog, as its frozen definition."""
    from toolbridge._tools.convert import to_tool

    return to_tool(catalog()[name])
