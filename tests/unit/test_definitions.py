"""Tool definitions in every provider's format: golden files, the providers' SDK types, and
what each format cannot express.

The golden files live in tests/golden/definitions/; after an intended change, regenerate them
with ``TOOLBRIDGE_UPDATE_GOLDEN=1 python -m pytest tests/unit/test_definitions.py`` and
review the diff.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import mcp.types
import pytest
from anthropic.types import ToolParam
from anthropic.types.tool_param import InputSchemaTyped
from mcp_types import _v2025_11_25 as mcp_2025_11_25
from mcp_types import _v2026_07_28 as mcp_2026_07_28
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from tests.definitions_catalog import REFUND_INPUT, Address, Category, catalog
from toolbridge import DefinitionWarning, DroppedConstraint, ToolDefinitions, tool, tool_definitions
from toolbridge._definitions.build import FORMATS, MCP_CONFIRMATION_KEY, DefinitionFormat

GOLDEN = Path(__file__).parent.parent / "golden" / "definitions"
UPDATE = os.environ.get("TOOLBRIDGE_UPDATE_GOLDEN") == "1"


def quiet_definitions(tools: Mapping[str, object], format: DefinitionFormat) -> ToolDefinitions:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DefinitionWarning)
        return tool_definitions(tools, format=format)


def by_name(definitions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for d in definitions}


def input_schema(definition: dict[str, Any], format: DefinitionFormat) -> dict[str, Any]:
    key = {"anthropic": "input_schema", "mcp": "inputSchema"}.get(format, "parameters")
    schema: dict[str, Any] = definition[key]
    return schema


# -- golden files ----------------------------------------------------------------------------


@pytest.mark.parametrize("format", FORMATS)
def test_definitions_match_the_golden_file(format: DefinitionFormat) -> None:
    definitions = quiet_definitions(catalog(), format)
    actual = {"definitions": definitions, "dropped": [str(d) for d in definitions.dropped]}
    path = GOLDEN / f"{format}.json"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(actual, indent=2, ensure_ascii=False) + "\n")
    assert json.loads(path.read_text()) == json.loads(json.dumps(actual))


# -- the providers' own types ----------------------------------------------------------------


def typed_dict_keys(cls: Any) -> set[str]:
    return set(cls.__required_keys__) | set(cls.__optional_keys__)


def model_keys(cls: type[BaseModel]) -> set[str]:
    return {field.alias or name for name, field in cls.model_fields.items()}


def test_anthropic_definitions_are_anthropic_tool_params() -> None:
    for definition in quiet_definitions(catalog(), "anthropic"):
        TypeAdapter(ToolParam).validate_python(definition)
        TypeAdapter(InputSchemaTyped).validate_python(definition["input_schema"])
        # The Messages API refuses fields it does not know; the SDK's TypedDict would not.
        assert set(definition) <= typed_dict_keys(ToolParam)


@pytest.mark.parametrize("format", ["openai", "openai-strict"])
def test_openai_definitions_are_function_tool_params(format: DefinitionFormat) -> None:
    for definition in quiet_definitions(catalog(), format):
        TypeAdapter(FunctionToolParam).validate_python(definition)
        assert set(definition) <= typed_dict_keys(FunctionToolParam)
        # The same definition, nested the Chat Completions way.
        chat = {"type": "function", "function": {k: v for k, v in definition.items() if k != "type"}}
        TypeAdapter(ChatCompletionFunctionToolParam).validate_python(chat)


def test_mcp_definitions_are_mcp_tools_in_both_protocol_versions() -> None:
    for definition in quiet_definitions(catalog(), "mcp"):
        mcp.types.Tool.model_validate(definition)
        for version in (mcp_2025_11_25, mcp_2026_07_28):
            version.Tool.model_validate(definition)
            assert set(definition) <= model_keys(version.Tool)


@pytest.mark.parametrize("format", FORMATS)
def test_input_schemas_are_valid_json_schema_with_an_object_root(format: DefinitionFormat) -> None:
    for definition in quiet_definitions(catalog(), format):
        schema = input_schema(definition, format)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object"
        for refused in ("anyOf", "oneOf", "allOf", "not", "enum"):
            assert refused not in schema


def test_definitions_are_a_plain_json_list_ordered_by_name() -> None:
    definitions = quiet_definitions(catalog(), "anthropic")
    assert isinstance(definitions, list)
    assert [d["name"] for d in definitions] == sorted(catalog())
    assert json.loads(json.dumps(definitions)) == list(definitions)
    assert definitions.format == "anthropic"


# -- OpenAI strict mode ----------------------------------------------------------------------

STRICT_UNSUPPORTED = {
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
    "patternProperties",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "default",
    "discriminator",
    "dependentRequired",
    "dependentSchemas",
    "prefixItems",
}


def strict_violations(node: Any, path: str = "") -> list[str]:
    """What OpenAI's strict mode would refuse in a schema, as a list of places."""
    found: list[str] = []
    if not isinstance(node, dict):
        return [f"{path}: not a schema object"]
    found += [f"{path}/{key}" for key in STRICT_UNSUPPORTED & set(node)]
    if "$ref" in node and len(node) > 1:
        found.append(f"{path}: $ref with siblings")
    if not {"type", "$ref", "anyOf", "enum", "const"} & set(node) and "$defs" not in node:
        found.append(f"{path}: no type")
    if node.get("type") == "object" or "properties" in node:
        if node.get("additionalProperties") is not False:
            found.append(f"{path}: object not closed")
        if sorted(node.get("required", [])) != sorted(node.get("properties", {})):
            found.append(f"{path}: not every property required")
    if "format" in node and node["format"] not in {"date-time", "date", "time", "duration", "email", "uuid"}:
        found.append(f"{path}/format")
    for key in ("properties", "$defs"):
        for name, child in node.get(key, {}).items():
            found += strict_violations(child, f"{path}/{key}/{name}")
    for index, child in enumerate(node.get("anyOf", [])):
        found += strict_violations(child, f"{path}/anyOf/{index}")
    if "items" in node:
        found += strict_violations(node["items"], f"{path}/items")
    return found


def test_strict_definitions_hold_only_what_strict_mode_accepts() -> None:
    definitions = quiet_definitions(catalog(), "openai-strict")
    strict = [d for d in definitions if d["strict"]]
    expected = {"createOrder", "draw", "refund", "saveCategories", "searchCustomers"}
    assert {d["name"] for d in strict} == expected
    for definition in strict:
        assert strict_violations(definition["parameters"]) == [], definition["name"]


def test_strict_mode_makes_optionals_required_and_nullable() -> None:
    definition = by_name(quiet_definitions(catalog(), "openai-strict"))["searchCustomers"]
    parameters = definition["parameters"]
    assert parameters["required"] == ["query", "limit", "status", "regions"]
    assert parameters["properties"]["limit"] == {
        "anyOf": [{"type": "integer"}, {"type": "null"}],
        "description": "Most results to return. (default: 10)",
    }
    # Already nullable: left as it is, without its null default.
    assert parameters["properties"]["status"] == {
        "anyOf": [{"enum": ["active", "churned"], "type": "string"}, {"type": "null"}],
        "description": "Only customers with this status.",
    }


def test_what_strict_mode_cannot_carry_is_reported_and_the_tool_still_checks_it() -> None:
    definitions = quiet_definitions(catalog(), "openai-strict")
    dropped = {(d.tool, d.pointer) for d in definitions.dropped}
    assert ("createOrder", "/$defs/LineItem/properties/sku/minLength") in dropped
    assert ("createOrder", "/properties/tags/uniqueItems") in dropped
    assert ("createOrder", "/properties/website/anyOf/0/format") in dropped
    assert ("draw", "/properties/shape/oneOf") in dropped
    # The daemon still validates the call against the original model.
    from tests.definitions_catalog import catalog_tool

    sku_too_short = {
        "customer_id": "c1",
        "items": [{"sku": "ab", "quantity": 1, "unit_price": 1.0}],
        "shipping": {"street": "Main 1", "postcode": "12345"},
    }
    with pytest.raises(ValueError, match="/items/0/sku"):
        catalog_tool("createOrder").bind([], sku_too_short, json.dumps(sku_too_short).encode())


def test_a_tool_strict_mode_cannot_express_is_sent_non_strict_and_reported() -> None:
    definitions = quiet_definitions(catalog(), "openai-strict")
    named = by_name(definitions)
    assert named["tagCustomer"]["strict"] is False
    plain = by_name(quiet_definitions(catalog(), "openai"))
    assert named["tagCustomer"]["parameters"] == plain["tagCustomer"]["parameters"]
    assert named["ping"]["strict"] is False  # takes any object: strict mode cannot say that
    reasons = {d.tool: d.reason for d in definitions.dropped if d.pointer in ("/", "", "/properties/labels")}
    assert "free-form keys" in reasons["tagCustomer"]
    assert "strict: false" in reasons["ping"]


def test_arguments_a_strict_model_sends_for_omitted_optionals_are_accepted() -> None:
    """Strict mode sends every property; null for an optional one means "not given"."""
    from tests.definitions_catalog import catalog_tool

    definitions = by_name(quiet_definitions(catalog(), "openai-strict"))
    arguments = {
        "customer_id": "c1",
        "items": [{"sku": "abc", "quantity": 2, "unit_price": 1.5}],
        "shipping": {"street": "Main 1", "postcode": "12345", "country": None},
        "billing": None,
        "priority": None,
        "tags": None,
        "note": None,
        "website": None,
        "deliver_after": None,
    }
    # What the model may send under the strict schema...
    jsonschema.Draft202012Validator(definitions["createOrder"]["parameters"]).validate(arguments)
    # ...is a valid call, the defaults filling in for the nulls.
    bound = catalog_tool("createOrder").bind([], arguments, json.dumps(arguments).encode())
    assert bound.input["shipping"]["country"] == "US"
    assert bound.input["priority"] == "low"
    assert bound.input["tags"] == []
    assert bound.input["billing"] is None

    search = {"query": "acme", "limit": None, "status": None, "regions": None}
    jsonschema.Draft202012Validator(definitions["searchCustomers"]["parameters"]).validate(search)
    bound = catalog_tool("searchCustomers").bind([], search, json.dumps(search).encode())
    # limit is left to the function's default, so what follows it goes by name.
    assert (bound.args, bound.kwargs) == (["acme"], {"status": None, "regions": None})

    refund = {"payment_id": "pay_1", "amount_cents": 5, "reason": None}
    jsonschema.Draft202012Validator(definitions["refund"]["parameters"]).validate(refund)
    assert catalog_tool("refund").bind([], refund, json.dumps(refund).encode()).input == {
        "payment_id": "pay_1",
        "amount_cents": 5,
    }


def test_recursive_models_keep_their_references() -> None:
    for format in FORMATS:
        schema = input_schema(by_name(quiet_definitions(catalog(), format))["saveCategories"], format)
        assert schema["type"] == "object"
        assert "$ref" not in schema  # the root reference is inlined...
        assert "Category" in schema["$defs"]  # ...and the recursion still resolves
        instance = {"name": "root", "children": [{"name": "leaf", "children": []}]}
        jsonschema.Draft202012Validator(schema).validate(instance)


# -- tools without schemas, confirmation, titles, refusals --------------------------------------


@pytest.mark.parametrize("format", ["anthropic", "openai", "mcp"])
def test_a_tool_without_an_input_schema_takes_any_object(format: DefinitionFormat) -> None:
    definitions = tool_definitions({"ping": tool.step(run=lambda args: "pong")}, format=format)
    schema = input_schema(definitions[0], format)
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({})
    assert validator.is_valid({"anything": [1, {"goes": True}]})
    assert not validator.is_valid([1, 2])


def test_requires_confirmation_appears_where_each_format_can_carry_it() -> None:
    tools = {
        "refund": tool.step(description="Refund a payment", run=lambda a: a, requires_confirmation=True),
        "look": tool.step(description="Look around", run=lambda a: a),
    }
    mcp_definitions = by_name(tool_definitions(tools, format="mcp"))
    assert mcp_definitions["refund"]["_meta"] == {MCP_CONFIRMATION_KEY: True}
    assert mcp_definitions["refund"]["description"] == "Refund a payment"
    assert "_meta" not in mcp_definitions["look"]
    for format in ("anthropic", "openai", "openai-strict"):
        definitions = by_name(quiet_definitions(tools, format))
        assert definitions["refund"]["description"] == "Refund a payment"  # as written
        assert definitions["look"]["description"] == "Look around"
        assert "requires_confirmation" not in definitions["refund"]  # the APIs refuse unknown fields


def test_schemas_carry_no_titles_made_up_from_names_but_keep_chosen_ones() -> None:
    class Explicit(BaseModel):
        model_config = ConfigDict(title="Explicit input")

        customer_id: str
        amount: int = Field(title="Amount in cents")
        address: Address

    schema = tool_definitions({"t": tool.step(input=Explicit, run=lambda a: a)})[0]["input_schema"]
    assert schema["title"] == "Explicit input"
    assert "title" not in schema["properties"]["customer_id"]
    assert schema["properties"]["amount"]["title"] == "Amount in cents"
    assert "title" not in schema["$defs"]["Address"]
    text = json.dumps(tool_definitions({"c": tool.step(input=Category, run=lambda a: a)}))
    assert '"title"' not in text


def test_strict_tools_describe_their_objects_as_closed_and_lax_ones_as_open() -> None:
    class Item(BaseModel):
        sku: str

    class Basket(BaseModel):
        items: list[Item]

    strict = tool_definitions({"t": tool.step(input=Basket, run=lambda a: a)})[0]["input_schema"]
    lax = tool_definitions({"t": tool.step(input=Basket, strict=False, run=lambda a: a)})[0]["input_schema"]
    assert strict["additionalProperties"] is False
    assert strict["$defs"]["Item"]["additionalProperties"] is False
    assert "additionalProperties" not in lax
    assert "additionalProperties" not in lax["$defs"]["Item"]


def test_definitions_that_drop_something_warn_and_list_it() -> None:
    with pytest.warns(DefinitionWarning, match=r"openai-strict definitions leave out .*createOrder"):
        definitions = tool_definitions(catalog(), format="openai-strict")
    assert all(isinstance(d, DroppedConstraint) for d in definitions.dropped)
    assert len(definitions.dropped) == 9


def test_definitions_that_drop_nothing_do_not_warn() -> None:
    # filterwarnings=error turns any warning into a failure here.
    definitions = tool_definitions(catalog(), format="anthropic")
    assert definitions.dropped == ()


def test_root_keywords_the_apis_refuse_are_dropped_except_for_mcp() -> None:
    either = dict(REFUND_INPUT, anyOf=[{"required": ["payment_id"]}, {"required": ["amount_cents"]}])
    tools = {"refund": tool.step(input=either, run=lambda a: a)}
    with pytest.warns(DefinitionWarning, match="anyOf at the root"):
        anthropic = tool_definitions(tools, format="anthropic")
    assert "anyOf" not in anthropic[0]["input_schema"]
    assert anthropic.dropped == (
        DroppedConstraint(
            "refund", "/anyOf", "anyOf at the root of an input schema is refused by the Anthropic API"
        ),
    )
    assert tool_definitions(tools, format="mcp")[0]["inputSchema"]["anyOf"] == either["anyOf"]


def test_mcp_keeps_object_output_schemas_and_reports_others() -> None:
    tools = {"createOrder": catalog()["createOrder"], "draw": catalog()["draw"]}
    with pytest.warns(DefinitionWarning, match="outputSchema"):
        definitions = tool_definitions(tools, format="mcp")
    named = by_name(definitions)
    assert named["createOrder"]["outputSchema"]["required"] == ["id", "total"]
    assert "outputSchema" not in named["draw"]  # an int: MCP wants an object
    assert [(d.tool, d.pointer) for d in definitions.dropped] == [("draw", "/outputSchema")]


def test_unknown_formats_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown format 'gemini'; use one of anthropic, openai"):
        tool_definitions(catalog(), format="gemini")  # type: ignore[arg-type]


def test_a_tool_whose_input_is_not_an_object_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"tool 'count' takes a value of type 'integer'.*declare input="):
        tool_definitions({"count": tool.step(input=int, run=lambda n: n)})


def test_invalid_tool_names_are_refused() -> None:
    with pytest.raises(ValueError, match="invalid tool name 'get customer'"):
        tool_definitions({"get customer": lambda: None})
    with pytest.raises(ValueError, match="invalid tool name '-get'"):
        tool_definitions({"-get": lambda: None})


def test_a_hyphenated_name_is_kept_as_given() -> None:
    # What every model API accepts (^[a-zA-Z0-9_-]{1,64}$), and the name AgentKit's seed uses.
    for format in ("anthropic", "openai", "mcp"):
        (definition,) = tool_definitions({"write-file": lambda path: None}, format=format)
        assert definition["name"] == "write-file"


def test_strict_mode_unwraps_a_lone_all_of_and_checks_what_it_brought() -> None:
    wrapped = {
        "type": "object",
        "properties": {
            "code": {"allOf": [{"type": "string", "maxLength": 4}], "description": "A short code"}
        },
        "required": ["code"],
    }
    with pytest.warns(DefinitionWarning, match="maxLength"):
        definitions = tool_definitions(
            {"t": tool.step(input=wrapped, run=lambda a: a)}, format="openai-strict"
        )
    assert definitions[0]["parameters"]["properties"]["code"] == {
        "type": "string",
        "description": "A short code",
    }
    assert [d.pointer for d in definitions.dropped] == ["/properties/code/maxLength"]


def test_changing_a_definition_leaves_the_tool_as_it_was() -> None:
    lax = tool.step(input=REFUND_INPUT, strict=False, run=lambda a: a)
    for format in FORMATS:
        definition = quiet_definitions({"refund": lax}, format)[0]
        input_schema(definition, format)["properties"]["amount_cents"]["minimum"] = 1000
    again = tool_definitions({"refund": lax})[0]["input_schema"]
    assert again["properties"]["amount_cents"]["minimum"] == 1
    assert lax.bind([], {"payment_id": "pay_1", "amount_cents": 5}, b"").input["amount_cents"] == 5


def test_a_durable_function_has_a_definition_from_its_trigger_schema(journal_path: Path) -> None:
    from toolbridge import Bridge, FunctionContext, event_type

    class RefundRequested(BaseModel):
        order_id: str = Field(description="The order to refund")

    bridge = Bridge(journal=journal_path)

    @bridge.function(
        id="refund", trigger=event_type("order/refund", schema=RefundRequested), description="Refund"
    )
    async def refund(ctx: FunctionContext) -> str:
        return "ok"

    @bridge.function(id="ping")
    async def ping(ctx: FunctionContext) -> str:
        return "pong"

    definitions = by_name(tool_definitions({"refund": refund, "ping": ping}))
    schema = definitions["refund"]["input_schema"]
    assert definitions["refund"]["description"] == "Refund"
    assert schema["properties"] == {"order_id": {"description": "The order to refund", "type": "string"}}
    assert "additionalProperties" not in schema  # the function ignores fields it does not know
    assert definitions["ping"]["input_schema"] == {
        "type": "object",
        "properties": {},
        "additionalProperties": True,
    }
