"""Input schemas for plain functions, read from their signature and docstring.

A plain function is called with positional arguments from the sandbox; its signature still
says what each argument is, so it gets a schema (for model APIs) and validation (for untrusted
callers) without the author writing one.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic.errors import PydanticUserError

from toolbridge._schema.schema import PydanticSchema, SchemaValidationError

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
        arguments = self._by_position(positional) if not named else None
        if arguments is not None and self._takes_anything:
            return positional, {}  # nothing to check, and the values go by position as they came
        if arguments is None:  # anything else: inspect says what is wrong, in its words
            try:
                arguments = dict(self.signature.bind(*positional, **named).arguments)
            except TypeError as exc:
                raise SchemaValidationError([("", str(exc))]) from None
        validated = self.schema.validate_python(arguments, strict=False)
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        skipped = False
        for field_name, parameter in zip(self.field_names, self.signature.parameters.values(), strict=True):
            if parameter.name not in arguments:
                skipped = True  # let the function's own default apply
                continue
            value = getattr(validated, field_name)
            # After a parameter left to its default, the next ones can only go by name.
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY or skipped:
                kwargs[parameter.name] = value
            else:
                args.append(value)
        return args, kwargs

    def _by_position(self, positional: list[Any]) -> dict[str, Any] | None:
        """The arguments of a call made with positional ones only, when they plainly fit.

        ``inspect.Signature.bind`` costs more than the validation itself; for the common call
        (positional arguments, the rest left to their defaults) the mapping is a ``zip``.
        ``None`` when the call is anything else (too many, a required one missing).
        """
        names, required = self._positional_shape
        if not required <= len(positional) <= len(names):
            return None
        return dict(zip(names, positional, strict=False))

    @functools.cached_property
    def _takes_anything(self) -> bool:
        """Whether no parameter is annotated (each takes any JSON value): validation would
        hand every value back unchanged, so a call that fits by position skips it."""
        return all(
            parameter.annotation in (inspect.Parameter.empty, Any)
            for parameter in self.signature.parameters.values()
        )

    @functools.cached_property
    def _positional_shape(self) -> tuple[tuple[str, ...], int]:
        """The names that may be given by position, and how many a call must give.

        A signature with a required keyword-only parameter has no such call: ``(…, 1 + n)``.
        """
        return _positional_shape(self.signature)


def _positional_shape(signature: inspect.Signature) -> tuple[tuple[str, ...], int]:
    names: list[str] = []
    required = 0
    for parameter in signature.parameters.values():
        if parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            names.append(parameter.name)
            if parameter.default is inspect.Parameter.empty:
                required = len(names)
        elif parameter.default is inspect.Parameter.empty:
            return tuple(names), len(names) + 1
    return tuple(names), required


def describe(func: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The function's description and its per-parameter descriptions, from its docstring."""
    doc = docstring_parser.parse(inspect.getdoc(func) or "")
    parts = [doc.short_description or "", doc.long_description or ""]
    description = "\n\n".join(part for part in parts if part)
    return description, {p.arg_name: p.description for p in doc.params if p.description}


def read_signature(func: Callable[..., Any]) -> FunctionSignature | None:
    """Build validation for ``func`` from its signature; ``None`` when it has none to read.

    The schema has a property per parameter, named after it: its annotation gives the
    type (``Any`` when there is none), its default makes it optional, and the docstring's
    ``Args:`` section (Google, NumPy, reST or Epydoc style) gives its description.

    Raises:
        TypeError: for signatures a sandbox cannot call (``*args`` or ``**kwargs``), or
            annotations that are not JSON data (a database client, say).
    """
    try:
        signature = inspect.signature(func, eval_str=True)
    except ValueError:
        return None  # a builtin without a readable signature: arguments pass unchecked
    except NameError as exc:
        raise TypeError(
            f"cannot read the annotations of {getattr(func, '__qualname__', func)!r}: {exc}; "
            "define the types they name at module level"
        ) from exc
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
        documented = parameter_docs.get(parameter.name)
        # description=None would erase a description given in Annotated[..., Field()].
        field = (
            Field(default, alias=parameter.name)
            if documented is None
            else Field(default, alias=parameter.name, description=documented)
        )
        fields[f"p{index}"] = (annotation, field)
    try:
        model: type[BaseModel] = create_model(
            "Arguments", __config__=ConfigDict(arbitrary_types_allowed=False), **fields
        )
        schema = PydanticSchema(model)
    except (PydanticUserError, TypeError) as exc:
        raise TypeError(_unsupported(func, signature, exc)) from exc
    return FunctionSignature(signature, schema, tuple(fields))


def _unsupported(func: Callable[..., Any], signature: inspect.Signature, error: Exception) -> str:
    """Name the parameter whose annotation pydantic cannot validate, and what to do instead."""
    for parameter in signature.parameters.values():
        if parameter.annotation is inspect.Parameter.empty:
            continue
        try:
            TypeAdapter(parameter.annotation).json_schema()
        except (PydanticUserError, TypeError):
            return (
                f"parameter {parameter.name!r} of {getattr(func, '__qualname__', func)!r} is "
                f"annotated {parameter.annotation!r}, which is not JSON data a sandbox can send: "
                "annotate it with str, int, float, bool, lists, dicts, enums or pydantic models, "
                "or close over the object instead of taking it as a parameter"
            )
    return f"cannot build a schema for the parameters of {func!r}: {error}"
