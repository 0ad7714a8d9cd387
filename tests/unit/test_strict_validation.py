"""``strict``: what a tool.step accepts, with a pydantic model or a JSON Schema dict, and the
null that stands for an optional argument left out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from toolbridge import tool
from toolbridge._schema.nulls import NullOmission, omit_null_optionals
from toolbridge._schema.schema import SchemaValidationError
from toolbridge._schema.walk import admits_null, close_objects, inline_root_ref
from toolbridge._tools.tool import BoundCall, Tool


class Line(BaseModel):
    sku: str
    quantity: int = 1


class Basket(BaseModel):
    customer_id: str
    lines: list[Line] = []
    coupon: str | None = None


BASKET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "customer_id": {"type": "string"},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer", "default": 1}},
                "required": ["sku"],
            },
        },
        "coupon": {"type": ["string", "null"]},
    },
    "required": ["customer_id"],
}


def step(input: Any, *, strict: bool = True) -> Tool:
    return tool.step(input=input, strict=strict, run=lambda args: args)


def bind(target: Tool, arguments: dict[str, Any]) -> BoundCall:
    return target.bind([], arguments, json.dumps(arguments).encode())


def problems(target: Tool, arguments: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(SchemaValidationError) as caught:
        bind(target, arguments)
    return caught.value.problems


@pytest.mark.parametrize("declared", [Basket, BASKET_SCHEMA], ids=["model", "json-schema"])
def test_strict_refuses_coercion_and_fields_the_schema_does_not_declare(declared: Any) -> None:
    strict = step(declared)
    assert problems(strict, {"customer_id": 42})[0][0] == "/customer_id"
    assert problems(strict, {"customer_id": "c", "lines": [{"sku": "a", "quantity": "2"}]})[0][0] == (
        "/lines/0/quantity"
    )
    assert problems(strict, {"customer_id": "c", "gift": True}) == [
        ("/gift", "Extra inputs are not permitted")
    ]
    nested_extra = {"customer_id": "c", "lines": [{"sku": "a", "colour": "red"}]}
    assert problems(strict, nested_extra) == [("/lines/0/colour", "Extra inputs are not permitted")]
    assert problems(strict, {}) == [("/customer_id", "Field required")]


def test_lax_coerces_and_passes_extra_fields_to_the_tool() -> None:
    lax = step(Basket, strict=False)
    bound = bind(lax, {"customer_id": "c", "lines": [{"sku": "a", "quantity": "2"}], "gift": True})
    basket = bound.args[0]
    assert basket.lines[0].quantity == 2
    assert basket.model_extra == {"gift": True}
    # Lax is not anything goes: what cannot be coerced is still refused.
    assert problems(lax, {"customer_id": "c", "lines": [{"sku": "a", "quantity": "two"}]})[0][0] == (
        "/lines/0/quantity"
    )


def test_lax_json_schema_tools_pass_extra_fields_through() -> None:
    lax = step(BASKET_SCHEMA, strict=False)
    assert bind(lax, {"customer_id": "c", "gift": True}).args == [{"customer_id": "c", "gift": True}]
    assert problems(lax, {"customer_id": 1})[0][0] == "/customer_id"  # a number never becomes a string


def test_strict_closes_objects_even_where_a_model_allows_extra() -> None:
    class Open(BaseModel):
        model_config = ConfigDict(extra="allow")
        name: str

    assert problems(step(Open), {"name": "n", "more": 1}) == [("/more", "Extra inputs are not permitted")]
    assert bind(step(Open, strict=False), {"name": "n", "more": 1}).args[0].model_extra == {"more": 1}


def test_validation_problems_point_at_every_offending_field() -> None:
    found = problems(step(Basket), {"lines": [{"quantity": "x"}], "coupon": 3})
    assert [pointer for pointer, _ in found] == [
        "/customer_id",
        "/lines/0/sku",
        "/lines/0/quantity",
        "/coupon",
    ]
    json_found = problems(step(BASKET_SCHEMA), {"lines": [{"quantity": "x"}], "coupon": 3})
    assert {pointer for pointer, _ in json_found} == {
        "/customer_id",
        "/lines/0/sku",
        "/lines/0/quantity",
        "/coupon",
    }


def test_a_null_for_an_optional_field_that_refuses_null_means_not_given() -> None:
    strict = step(Basket)
    bound = bind(strict, {"customer_id": "c", "lines": [{"sku": "a", "quantity": None}], "coupon": None})
    # quantity takes its default; coupon accepts null, so null it is.
    assert bound.input == {"customer_id": "c", "lines": [{"sku": "a", "quantity": 1}], "coupon": None}
    assert bind(strict, {"customer_id": "c", "lines": None}).input["lines"] == []
    # A required field stays required: null is not a way around it.
    assert problems(strict, {"customer_id": None})[0][0] == "/customer_id"


def test_a_json_schema_tool_sees_such_a_null_as_a_field_left_out() -> None:
    strict = step(BASKET_SCHEMA)
    bound = bind(strict, {"customer_id": "c", "lines": [{"sku": "a", "quantity": None}], "coupon": None})
    assert bound.input == {"customer_id": "c", "lines": [{"sku": "a"}], "coupon": None}
    assert bind(strict, {"customer_id": "c", "lines": None}).input == {"customer_id": "c"}
    assert problems(strict, {"customer_id": None})[0][0] == "/customer_id"


def test_omitting_nulls_follows_references_unions_and_maps() -> None:
    schema = Basket.model_json_schema()
    value = {"customer_id": "c", "lines": [{"sku": "a", "quantity": None}], "coupon": None}
    assert omit_null_optionals(value, schema) == {"customer_id": "c", "lines": [{"sku": "a"}], "coupon": None}
    optional_nested: dict[str, Any] = {
        "type": "object",
        "properties": {"line": {"anyOf": [{"$ref": "#/$defs/Line"}, {"type": "null"}]}},
        "$defs": {"Line": schema["$defs"]["Line"]},
    }
    assert omit_null_optionals({"line": {"sku": "a", "quantity": None}}, optional_nested) == {
        "line": {"sku": "a"}
    }
    assert omit_null_optionals({"line": None}, optional_nested) == {"line": None}
    mapping = {"type": "object", "additionalProperties": {"$ref": "#/$defs/Line"}, "$defs": schema["$defs"]}
    assert omit_null_optionals({"x": {"sku": "a", "quantity": None}}, mapping) == {"x": {"sku": "a"}}


def test_omitting_nulls_returns_the_same_object_when_there_is_none_to_omit() -> None:
    value = {"customer_id": "c", "lines": [{"sku": "a"}], "coupon": None}
    assert omit_null_optionals(value, Basket.model_json_schema()) is value


def test_admits_null_reads_types_unions_enums_and_references() -> None:
    root = {"$defs": {"Maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "Name": {"type": "string"}}}
    assert admits_null({"type": ["string", "null"]}, root)
    assert admits_null({"$ref": "#/$defs/Maybe"}, root)
    assert admits_null({}, root)
    assert admits_null({"$ref": "https://example.com/remote"}, root)  # unknown: assume it may
    assert not admits_null({"$ref": "#/$defs/Name"}, root)
    assert not admits_null({"enum": ["a", "b"]}, root)
    assert admits_null({"enum": ["a", None]}, root)
    assert not admits_null({"const": "x"}, root)
    assert not admits_null({"allOf": [{"type": "string"}]}, root)


def test_close_objects_leaves_maps_and_partial_views_open() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object", "additionalProperties": True},
            "either": {"anyOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]},
            "both": {"allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]},
        },
    }
    closed = close_objects(schema)
    assert closed["additionalProperties"] is False
    properties = closed["properties"]
    assert properties["labels"]["additionalProperties"] == {"type": "string"}
    assert properties["free"]["additionalProperties"] is True  # a map with no declared properties
    assert all(branch["additionalProperties"] is False for branch in properties["either"]["anyOf"])
    assert all("additionalProperties" not in part for part in properties["both"]["allOf"])
    assert "additionalProperties" not in schema  # the argument is left as it was


def test_inline_root_ref_gives_recursive_models_an_object_root() -> None:
    class Node(BaseModel):
        children: list[Node] = []

    schema = Node.model_json_schema()
    assert "$ref" in schema
    inlined = inline_root_ref(schema)
    assert inlined["type"] == "object"
    assert inlined["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}


def test_the_null_plan_is_compiled_once_and_skips_schemas_with_nothing_to_drop() -> None:
    class AllRequired(BaseModel):
        name: str
        tags: list[str]
        note: str | None = None  # optional, but null is a value it accepts

    assert not NullOmission(AllRequired.model_json_schema()).needed
    assert NullOmission(Basket.model_json_schema()).needed

    class Tree(BaseModel):
        label: str
        weight: int = 1
        children: list[Tree] = []

    plan = NullOmission(Tree.model_json_schema())  # recursive: the plan refers to itself
    leaf: dict[str, Any] = {"label": "c", "weight": None}
    deep = {"label": "a", "children": [{"label": "b", "children": [leaf]}]}
    assert plan.apply(deep) == {"label": "a", "children": [{"label": "b", "children": [{"label": "c"}]}]}
    assert leaf == {"label": "c", "weight": None}  # not modified in place
