"""Plain functions as tools: a schema read from the signature and the docstring, and calls
(positional or named) checked against it."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from toolbridge import tool_definitions
from toolbridge._schema.schema import SchemaValidationError
from toolbridge._tools.convert import to_tool


class Plan(enum.Enum):
    FREE = "free"
    TEAM = "team"


class Database:
    """Not JSON: a host object a tool should close over, not take."""


class Contact(BaseModel):
    email: str
    phone: str | None = None


def invite(
    email: str,
    seats: int = 1,
    plan: Plan = Plan.FREE,
    teams: list[str] | None = None,
    contact: Contact | None = None,
    *,
    role: Literal["admin", "member"] = "member",
) -> dict[str, Any]:
    """Invite someone to the workspace.

    The invitation expires after a week.

    Args:
        email: Where the invitation goes.
        seats: Seats to reserve for them.
        plan: The plan they join.
        teams: Teams to add them to.
        contact: Who to ask about the invitation.
        role: What they may do.
    """
    return {"email": email, "seats": seats, "plan": plan, "teams": teams, "contact": contact, "role": role}


def schema_of(func: Any) -> dict[str, Any]:
    definition: dict[str, Any] = tool_definitions({"f": func})[0]
    assert definition["description"] == to_tool(func).description
    schema: dict[str, Any] = definition["input_schema"]
    return schema


def test_description_and_parameters_come_from_the_signature_and_docstring() -> None:
    definition = tool_definitions({"invite": invite})[0]
    assert (
        definition["description"]
        == "Invite someone to the workspace.\n\nThe invitation expires after a week."
    )
    schema = definition["input_schema"]
    assert list(schema["properties"]) == ["email", "seats", "plan", "teams", "contact", "role"]
    assert schema["required"] == ["email"]
    assert schema["additionalProperties"] is False  # the signature takes no other names
    properties = schema["properties"]
    assert properties["email"] == {"description": "Where the invitation goes.", "type": "string"}
    assert properties["seats"] == {
        "default": 1,
        "description": "Seats to reserve for them.",
        "type": "integer",
    }
    # An enum, a nested model: $defs, described where they are used.
    assert properties["plan"] == {
        "$ref": "#/$defs/Plan",
        "default": "free",
        "description": "The plan they join.",
    }
    assert schema["$defs"]["Plan"] == {"enum": ["free", "team"], "type": "string"}
    assert properties["contact"]["anyOf"] == [{"$ref": "#/$defs/Contact"}, {"type": "null"}]
    assert schema["$defs"]["Contact"]["required"] == ["email"]
    # Optional lists, literals.
    assert properties["teams"]["anyOf"] == [{"items": {"type": "string"}, "type": "array"}, {"type": "null"}]
    assert properties["role"] == {
        "default": "member",
        "description": "What they may do.",
        "enum": ["admin", "member"],
        "type": "string",
    }


def test_other_docstring_styles_describe_parameters_too() -> None:
    def numpy_style(query: str) -> None:
        """Search.

        Parameters
        ----------
        query : str
            What to look for.
        """

    def rest_style(query: str) -> None:
        """Search.

        :param query: What to look for.
        """

    for func in (numpy_style, rest_style):
        assert schema_of(func)["properties"]["query"]["description"] == "What to look for."


def test_field_annotations_describe_and_constrain_parameters() -> None:
    def page(size: Annotated[int, Field(ge=1, le=100, description="Rows per page")] = 20) -> None:
        """Page through rows."""

    assert schema_of(page)["properties"]["size"] == {
        "default": 20,
        "description": "Rows per page",
        "maximum": 100,
        "minimum": 1,
        "type": "integer",
    }


def test_unannotated_parameters_take_any_json_and_async_functions_work() -> None:
    async def echo(value, times=2):  # type: ignore[no-untyped-def]
        return [value] * times

    schema = schema_of(echo)
    assert schema["properties"] == {"value": {}, "times": {"default": 2}}
    assert to_tool(echo).bind([{"any": "thing"}], {}, b"").args == [{"any": "thing"}]


def test_positional_and_named_calls_bind_to_the_signature() -> None:
    tool = to_tool(invite)
    positional = tool.bind(["ann@example.com", "3", "team"], {}, b"")
    assert positional.args == ["ann@example.com", 3, Plan.TEAM]  # lax: "3" is coerced, as before
    assert positional.kwargs == {}
    named = tool.bind([], {"email": "ann@example.com", "role": "admin"}, b"")
    assert named.args == ["ann@example.com"]
    assert named.kwargs == {"role": "admin"}
    mixed = tool.bind(["ann@example.com"], {"contact": {"email": "bo@example.com"}}, b"")
    assert mixed.kwargs == {"contact": Contact(email="bo@example.com")}


def test_a_null_for_an_optional_named_argument_leaves_the_default() -> None:
    tool = to_tool(invite)
    bound = tool.bind([], {"email": "ann@example.com", "seats": None, "plan": None, "teams": None}, b"")
    assert bound.args == ["ann@example.com"]
    # seats and plan are left to their defaults; teams takes None, which it accepts.
    assert bound.kwargs == {"teams": None}


@pytest.mark.parametrize(
    ("positional", "named", "pointer"),
    [
        (["ann@example.com", "many"], {}, "/seats"),
        ([], {"email": "ann@example.com", "plan": "enterprise"}, "/plan"),
        ([], {"email": "ann@example.com", "contact": {"phone": "1"}}, "/contact/email"),
        ([], {"seats": 2}, ""),
        ([], {"email": "a", "nickname": "x"}, ""),
        (["a", 1, "free", None, None, "admin"], {}, ""),
    ],
)
def test_calls_that_do_not_fit_the_signature_name_the_problem(
    positional: list[Any], named: dict[str, Any], pointer: str
) -> None:
    with pytest.raises(SchemaValidationError) as caught:
        to_tool(invite).bind(positional, named, b"")
    assert caught.value.problems[0][0] == pointer


def test_signatures_a_sandbox_cannot_call_are_refused_when_the_tool_is_declared() -> None:
    def variadic(*ids: str) -> None: ...

    def with_client(db: Database, customer_id: str) -> None: ...

    with pytest.raises(TypeError, match=r"parameter 'ids' .* is variadic"):
        to_tool(variadic)
    with pytest.raises(TypeError, match=r"parameter 'db' of .*with_client.* is not JSON data"):
        to_tool(with_client)

    class Local(BaseModel):
        x: int

    def local_type(value: Local) -> None: ...

    # With postponed annotations, a class defined in a function cannot be found by name.
    with pytest.raises(TypeError, match=r"cannot read the annotations .* define the types they name"):
        to_tool(local_type)
