"""Schemas that validate what crosses the sandbox boundary.

A schema is declared as a pydantic model (or any type pydantic can validate, such as ``int``
or ``list[str]``), or as a JSON Schema dict. Either way it yields a JSON Schema for model APIs
and validates values, reporting each problem with a JSON pointer to the offending field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import jsonschema
from jsonschema.exceptions import SchemaError
from pydantic import TypeAdapter, ValidationError
from pydantic.errors import PydanticUserError

__all__ = ["Schema", "SchemaValidationError", "schema_from"]

MAX_REPORTED_PROBLEMS = 5


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


class PydanticSchema:
    """A schema declared as a pydantic model or any type pydantic validates."""

    def __init__(self, declared: Any) -> None:
        try:
            self._adapter: TypeAdapter[Any] = TypeAdapter(declared)
            self._json_schema = self._adapter.json_schema()
        except PydanticUserError as exc:
            raise TypeError(f"cannot build a schema from {declared!r}: {exc}") from exc
        self.declared = declared

    @property
    def json_schema(self) -> dict[str, Any]:
        return self._json_schema

    def validate_json(self, data: bytes | str, *, strict: bool) -> Any:
        try:
            return self._adapter.validate_json(data, strict=strict, extra="forbid" if strict else "ignore")
        except ValidationError as exc:
            raise SchemaValidationError(_pydantic_problems(exc)) from None

    def validate_python(self, value: Any, *, strict: bool) -> Any:
        try:
            return self._adapter.validate_python(value, strict=strict, extra="forbid" if strict else "ignore")
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
        self._json_schema = schema

    @property
    def json_schema(self) -> dict[str, Any]:
        return self._json_schema

    def validate_json(self, data: bytes | str, *, strict: bool) -> Any:
        from toolbridge._json import JSONFormatError, loads_strict

        try:
            value = loads_strict(data)
        except JSONFormatError as exc:
            raise SchemaValidationError([("", str(exc))]) from None
        return self.validate_python(value, strict=strict)

    def validate_python(self, value: Any, *, strict: bool) -> Any:
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if errors:
            raise SchemaValidationError([(json_pointer(e.absolute_path), e.message) for e in errors])
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
