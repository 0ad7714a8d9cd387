"""Tool definitions for a model API, from the same tools a sandbox calls."""

import warnings
from typing import Literal

from pydantic import BaseModel, Field

from toolbridge import DefinitionWarning, tool, tool_definitions


class Search(BaseModel):
    query: str = Field(max_length=200, description="Text to look for")
    limit: int = 10


search = tool.step(description="Search customers", input=Search, run=lambda args, ctx: [])


# --8<-- [start:signature]
def search_customers(
    query: str, limit: int = 10, status: Literal["active", "churned"] | None = None
) -> list[str]:
    """Search customers by name or email.

    Args:
        query: Text to look for.
        limit: Most results to return.
        status: Only customers with this status.
    """
    return []


# --8<-- [end:signature]


# --8<-- [start:formats]
tools = {"search": search, "searchCustomers": search_customers}

anthropic = tool_definitions(tools)  # format="anthropic" is the default
assert anthropic[0] == {
    "name": "search",
    "description": "Search customers",
    "input_schema": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "maxLength": 200, "description": "Text to look for"},
            "limit": {"type": "integer", "default": 10},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
}
openai = tool_definitions(tools, format="openai")
assert openai[0]["type"] == "function" and openai[0]["parameters"] == anthropic[0]["input_schema"]
mcp = tool_definitions(tools, format="mcp")
assert mcp[0]["inputSchema"] == anthropic[0]["input_schema"]

# Strict mode cannot say maxLength: the definition drops it, and says so.
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    strict = tool_definitions(tools, format="openai-strict")
assert strict[0]["strict"] is True
assert [str(dropped) for dropped in strict.dropped] == [
    "search: /properties/query/maxLength: maxLength is not supported by OpenAI strict mode"
]
assert any(issubclass(warning.category, DefinitionWarning) for warning in caught)
# --8<-- [end:formats]

described = tool_definitions({"searchCustomers": search_customers})[0]
assert described["description"] == "Search customers by name or email."
assert described["input_schema"]["properties"]["limit"] == {
    "type": "integer",
    "default": 10,
    "description": "Most results to return.",
}
assert described["input_schema"]["required"] == ["query"]
