"""Schemas that validate what crosses the sandbox boundary.

A schema is declared as a pydantic model (or any type pydantic can validate, such as ``int``
or ``list[str]``), or as a JSON Schema dict. Either way it yields a JSON Schema for model APIs
and validates values, reporting each problem with a JSON pointer to the offending field.

``strict=True`` (a tool's default) means pydantic strict mode and no fields beyond those the
schema declares; ``strict=False`` means lax coercion (``"5"`` for ``5``) and extra fields passed
through. Both mean the same for a JSON Schema dict: in strict mode its objects are closed and
nothing is coerced; in lax mode it coerces what pydantic's lax mode would (:mod:`_schema.lax`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

import jsonschema
from jsonschema.exceptions import SchemaError
from pydantic import TypeAdapter, ValidationError
from pydantic.errors import PydanticUserError
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue
from pydantic_core import core_schema

from toolbridge._json import JSONFormatError, loads_strict
from toolbridge._schema.lax import coerce_lax
from toolbridge._schema.walk import close_objects

__all__ = ["Schema", "SchemaValidationError", "schema_from"]

MAX_REPORTED_PROBLEMS = 5

Extra = Literal["forbid", "allow"]


class SchemaValidationError(ValueError):
    """A value failed validation. ``problems`` holds ``(json_pointer, message)`` pairs."""

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        self.problems = list(problems)
        shown = "; ".join(
            f"{pointer or '/'}: {message}" for pointer, message in problems[:MAX_REPORTED_PROBLEMS]
        )
        hidden = len(problems) - MAX_REPORTED_PROBLEMS
        super().__init__(shown + (f" (and {hidden} more)" if hidden > 0 else ""))


def json_pointer(path: Iterable[str | int]) -> str:
    """RFC 6901 pointer for a path of keys and indexes."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


class Schema(Protocol):
    """Validates values against one declared schema."""

    @property
    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema, for model APIs."""
        ...

    def validate_json(self, data: bytes | str, *, strict: bool) -> Any:
        """Validate JSON text; return the validated value (a model instance for models)."""
        ...

    def validate_python(self, value: Any, *, strict: bool) -> Any:
        """Validate an already parsed value."""
        ...

    def to_jsonable(self, value: Any) -> Any:
        """A validated value as plain JSON data."""
        ...


def _pydantic_problems(error: ValidationError) -> list[tuple[str, str]]:
    return [(json_pointer(e["loc"]), e["msg"]) for e in error.errors(include_url=False)]


def _jsonschema_problems(error: jsonschema.ValidationError) -> list[tuple[str, str]]:
    """Problems pointing at the field itself, as pydantic's do, not at the object holding it."""
    path = list(error.absolute_path)
    instance, schema = error.instance, error.schema
    if error.validator == "required" and isinstance(instance, dict) and isinstance(schema, dict):
        missing = [key for key in schema.get("required", []) if key not in instance]
        return [(json_pointer([*path, key]), "Field required") for key in missing]
    if error.validator == "additionalProperties" and isinstance(instance, dict) and isinstance(schema, dict):
        declared = schema.get("properties", {})
        patterns = list(schema.get("patternProperties", {}))
        extras = [
            key
            for key in instance
            if key not in declared and not any(re.search(pattern, key) for pattern in patterns)
        ]
        if extras:
            return [(json_pointer([*path, key]), "Extra inputs are not permitted") for key in extras]
    return [(json_pointer(path), error.message)]


def _extra(strict: bool) -> Extra:
    return "forbid" if strict else "allow"


class ToolJsonSchema(GenerateJsonSchema):
    """pydantic's JSON Schema without the titles it makes up from class and field names.

    Model APIs read a tool's name, its description and each property's description; a
    title such as ``"Customer Id"`` for ``customer_id`` tells the model nothing new and costs
    tokens in every request. Titles the author set (``Field(title=...)``, a ``title`` in the
    model's config) are kept.
    """

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        return _without_class_title(super().model_schema(schema), schema["cls"])

    def dataclass_schema(self, schema: core_schema.DataclassSchema) -> JsonSchemaValue:
        return _without_class_title(super().dataclass_schema(schema), schema["cls"])

    def typed_dict_schema(self, schema: core_schema.TypedDictSchema) -> JsonSchemaValue:
        return _without_class_title(super().typed_dict_schema(schema), schema["cls"])

    def generate(
        self, schema: core_schema.CoreSchema, mode: JsonSchemaMode = "validation"
    ) -> JsonSchemaValue:
        result = super().generate(schema, mode)
        # An enum's title is added after enum_schema() returns; it is its class name, which
        # is also the name of its entry in $defs.
        for name, definition in result.get("$defs", {}).items():
            if "enum" in definition and definition.get("title") == name:
                del definition["title"]
        return result


def _without_class_title(json_schema: JsonSchemaValue, cls: Any) -> JsonSchemaValue:
    config = getattr(cls, "model_config", None) or getattr(cls, "__pydantic_config__", None) or {}
    chosen = config.get("title") or config.get("model_title_generator")
    if not chosen and json_schema.get("title") == getattr(cls, "__name__", None):
        del json_schema["title"]
    return json_schema


class PydanticSchema:
    """A schema declared as a pydantic model or any type pydantic validates."""

    def __init__(self, declared: Any) -> None:
        try:
            self._adapter: TypeAdapter[Any] = TypeAdapter(declared)
            self._json_schema = self._adapter.json_schema(schema_generator=ToolJsonSchema)
        except PydanticUserError as exc:
            raise TypeError(f"cannot build a schema from {declared!r}: {exc}") from exc
        self.declared = declared

    @property
    def json_schema(self) -> dict[str, Any]:
        return self._json_schema

    def validate_json(self, data: bytes | str, *, strict: bool) -> Any:
        try:
            return self._adapter.validate_json(data, strict=strict, extra=_extra(strict))
        except ValidationError as exc:
            raise SchemaValidationError(_pydantic_problems(exc)) from None

    def validate_python(self, value: Any, *, strict: bool) -> Any:
        try:
            return self._adapter.validate_python(value, strict=strict, extra=_extra(strict))
        except ValidationError as exc:
            raise SchemaValidationError(_pydantic_problems(exc)) from None

    def to_jsonable(self, value: Any) -> Any:
        return self._adapter.dump_python(value, mode="json")


class JSONSchemaDict:
    """A schema declared as a JSON Schema dict, checked with the ``jsonschema`` library."""

    def __init__(self, declared: Mapping[str, Any]) -> None:
        schema = dict(declared)
        validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            validator_class.check_schema(schema)
        except SchemaError as exc:
            raise TypeError(f"not a valid JSON Schema: {exc.message}") from exc
        self._validator = validator_class(schema)
        # Strict validation closes every object that lists its properties, as pydantic's
        # extra="forbid" does for models.
        self._strict_validator = validator_class(close_objects(schema))
        self._json_schema = schema

    @property
    def json_schema(self) -> dict[str, Any]:
        return self._json_schema

    def validate_json(self, data: bytes | str, *, strict: bool) -> Any:
        try:
            value = loads_strict(data)
        except JSONFormatError as exc:
            raise SchemaValidationError([("", str(exc))]) from None
        return self.validate_python(value, strict=strict)

    def validate_python(self, value: Any, *, strict: bool) -> Any:
        validator = self._strict_validator if strict else self._validator
        if not strict:
            value = coerce_lax(validator, value)
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if errors:
            # One error per missing property, each naming them all: keep each problem once.
            problems = dict.fromkeys(problem for e in errors for problem in _jsonschema_problems(e))
            raise SchemaValidationError(list(problems))
        return value

    def to_jsonable(self, value: Any) -> Any:
        return value


def schema_from(declared: Any) -> Schema | None:
    """Build a schema from what a user declared: a type, a pydantic model, or a dict.

    Raises:
        TypeError: when the declaration is neither, with what to pass instead.
    """
    if declared is None:
        return None
    if isinstance(declared, Mapping):
        return JSONSchemaDict(declared)
    return PydanticSchema(declared)
