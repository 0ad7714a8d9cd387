"""Input schemas for plain functions, read from their signature and docstring.

A plain function is called with positional arguments from the sandbox; its signature still
says what each argument is, so it gets a schema (for model APIs) and validation (for untrusted
callers) without the author writing one.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, create_model

from toolbridge._schema import PydanticSchema, SchemaValidationError

_SUPPORTED_KINDS = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.KEYWORD_ONLY,
)


@dataclass(frozen=True)
class FunctionSignature:
    """How to validate arguments for a plain function and call it with them."""

    signature: inspect.Signature
    schema: PydanticSchema
    # Field names in the model are p0, p1, ... (so that a parameter called `json` or
    # `model_config` cannot clash with BaseModel); the parameter names are the aliases.
    field_names: tuple[str, ...]

    def bind(self, positional: list[Any], named: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """Validate sandbox arguments and return ``(args, kwargs)`` for the function.

        Raises:
            SchemaValidationError: when the arguments do not fit the signature or its types.
        """
        try:
            bound = self.signature.bind(*positional, **named)
        except TypeError as exc:
            raise SchemaValidationError([("", str(exc))]) from None
        validated = self.schema.validate_python(dict(bound.arguments), strict=False)
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for field_name, parameter in zip(self.field_names, self.signature.parameters.values(), strict=True):
            if parameter.name not in bound.arguments:
                continue  # let the function's own default apply
            value = getattr(validated, field_name)
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY:
                kwargs[parameter.name] = value
            else:
                args.append(value)
        return args, kwargs


def describe(func: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The function's description and its per-parameter descriptions, from its docstring."""
    doc = docstring_parser.parse(inspect.getdoc(func) or "")
    parts = [doc.short_description or "", doc.long_description or ""]
    description = "\n\n".join(part for part in parts if part)
    return description, {p.arg_name: p.description for p in doc.params if p.description}


def read_signature(func: Callable[..., Any]) -> FunctionSignature | None:
    """Build validation for ``func`` from its signature; ``None`` when it has none to read.

    Raises:
        TypeError: for signatures a sandbox cannot call (``*args`` or ``**kwargs``).
    """
    try:
        signature = inspect.signature(func, eval_str=True)
    except ValueError:
        return None  # a builtin without a readable signature: arguments pass unchecked
    _, parameter_docs = describe(func)
    fields: dict[str, Any] = {}
    for index, parameter in enumerate(signature.parameters.values()):
        if parameter.kind not in _SUPPORTED_KINDS:
            raise TypeError(
                f"parameter {parameter.name!r} of {func!r} is variadic; a tool's parameters "
                "must be named, so declare them, or use tool.step(input=...) instead"
            )
        annotation = Any if parameter.annotation is inspect.Parameter.empty else parameter.annotation
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[f"p{index}"] = (
            annotation,
            Field(default, alias=parameter.name, description=parameter_docs.get(parameter.name)),
        )
    model: type[BaseModel] = create_model(
        "Arguments", __config__=ConfigDict(arbitrary_types_allowed=False), **fields
    )
    return FunctionSignature(signature, PydanticSchema(model), tuple(fields))
