"""Input schemas rewritten for OpenAI's strict mode (Structured Outputs for function calls).

Strict mode accepts a subset of JSON Schema, and on that subset guarantees that the model's
arguments match. What it asks (OpenAI's "Supported schemas" guide, and the rules the OpenAI
SDK and pydantic-ai apply; checked in October 2026):

- the root is an object; every object says ``additionalProperties: false`` and lists every
  property in ``required`` (an optional property becomes nullable instead);
- every value has a type: ``{}`` (any value), an array without ``items``, and objects with
  free-form keys (``dict[str, int]``) cannot be expressed;
- ``$ref`` takes no sibling keywords; ``default`` is not allowed; ``oneOf``, ``allOf``,
  ``not``, ``if``/``then``/``else``, ``dependentRequired`` and ``dependentSchemas`` are not
  supported (``anyOf`` is, except at the root);
- unsupported constraints: ``minLength``, ``maxLength``, ``minProperties``,
  ``maxProperties``, ``patternProperties``, ``propertyNames``, ``unevaluatedProperties``,
  ``unevaluatedItems``, ``contains``, ``minContains``, ``maxContains``, ``uniqueItems``, a
  ``format`` other than the nine listed below, and a ``pattern`` with lookaround.

A constraint strict mode cannot carry is dropped and reported; the daemon still validates
every call against the tool's own schema. A schema that cannot be expressed at all raises
:class:`NotStrictCompatibleError`, and the caller sends that tool in non-strict form.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from toolbridge._schema.walk import admits_null

__all__ = ["NotStrictCompatibleError", "to_openai_strict"]

UNSUPPORTED_KEYWORDS = (
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
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
)
SUPPORTED_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")
# Keywords that say nothing about validity; strict mode refuses some of them.
_SILENTLY_REMOVED = ("$schema", "$id", "$comment", "discriminator")
_TYPED_BY = ("type", "$ref", "anyOf", "oneOf", "enum", "const", "properties")

Drop = tuple[str, str]
"""A dropped constraint: (JSON pointer into the original schema, why)."""


class NotStrictCompatibleError(ValueError):
    """The schema holds something strict mode cannot express; ``pointer`` says where."""

    def __init__(self, pointer: str, what: str) -> None:
        self.pointer = pointer
        self.reason = f"{what} cannot be expressed in OpenAI strict mode"
        super().__init__(f"{pointer or '/'}: {self.reason}")


def to_openai_strict(schema: dict[str, Any]) -> tuple[dict[str, Any], list[Drop]]:
    """Rewrite an object schema for strict mode.

    Returns:
        The rewritten schema and the constraints dropped on the way.

    Raises:
        NotStrictCompatibleError: when part of the schema cannot be expressed at all.
    """
    drops: list[Drop] = []
    rewritten = _Rewriter(schema, drops).node(copy.deepcopy(schema), "")
    return rewritten, drops


def _pointer(base: str, *parts: str | int) -> str:
    return base + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _has_lookaround(pattern: str) -> bool:
    escaped = False
    for index, char in enumerate(pattern):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif pattern.startswith(_LOOKAROUND, index):
            return True
    return False


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    annotations: dict[str, Any] = {key: node.pop(key) for key in ("description", "title") if key in node}
    if set(node) == {"anyOf"}:
        node["anyOf"].append({"type": "null"})
        return {**node, **annotations}
    return {"anyOf": [node, {"type": "null"}], **annotations}


class _Rewriter:
    def __init__(self, root: dict[str, Any], drops: list[Drop]) -> None:
        self.root = root  # the original, for questions such as "does this admit null?"
        self.drops = drops

    def drop(self, node: dict[str, Any], pointer: str, key: str, why: str) -> None:
        del node[key]
        self.drops.append((_pointer(pointer, key), why))

    def node(self, node: Any, pointer: str) -> dict[str, Any]:
        if not isinstance(node, dict):
            raise NotStrictCompatibleError(pointer, "a schema that is true or false")
        for key in _SILENTLY_REMOVED:
            node.pop(key, None)
        union = self._composition(node, pointer)  # first: a lone allOf brings in more keywords
        self._constraints(node, pointer)
        self._default(node)
        for key in ("$defs", "definitions"):
            if isinstance(node.get(key), dict):
                node[key] = {n: self.node(d, _pointer(pointer, key, n)) for n, d in node[key].items()}
        if not any(key in node for key in _TYPED_BY):
            raise NotStrictCompatibleError(pointer, "a value of any type")
        if "anyOf" in node:
            node["anyOf"] = [self.node(b, _pointer(pointer, union, i)) for i, b in enumerate(node["anyOf"])]
        kind = node.get("type")
        kinds = kind if isinstance(kind, list) else [kind]
        if "object" in kinds or "properties" in node:
            self._object(node, pointer)
        if "array" in kinds:
            self._array(node, pointer)
        return node

    def _constraints(self, node: dict[str, Any], pointer: str) -> None:
        for key in UNSUPPORTED_KEYWORDS:
            if key in node:
                self.drop(node, pointer, key, f"{key} is not supported by OpenAI strict mode")
        if "format" in node and node["format"] not in SUPPORTED_FORMATS:
            self.drop(
                node, pointer, "format", f"format {node['format']!r} is not supported by OpenAI strict mode"
            )
        pattern = node.get("pattern")
        if isinstance(pattern, str) and _has_lookaround(pattern):
            self.drop(
                node, pointer, "pattern", "a pattern with lookaround is not supported by OpenAI strict mode"
            )

    @staticmethod
    def _default(node: dict[str, Any]) -> None:
        # Not a constraint: an optional property becomes nullable, and null means "use the
        # default", so the default moves into the description where the model still sees it.
        if "default" not in node:
            return
        default = node.pop("default")
        if default is None:
            return
        text = json.dumps(default, ensure_ascii=False)
        description = node.get("description")
        node["description"] = f"{description} (default: {text})" if description else f"Default: {text}"

    def _composition(self, node: dict[str, Any], pointer: str) -> str:
        """Rewrite unions and wrappers; return the keyword the union's branches came from."""
        union = "anyOf"
        if "oneOf" in node:
            if "anyOf" in node:
                raise NotStrictCompatibleError(pointer, "oneOf beside anyOf")
            self.drops.append(
                (
                    _pointer(pointer, "oneOf"),
                    "oneOf became anyOf: strict mode does not check that only one matches",
                )
            )
            node["anyOf"] = node.pop("oneOf")
            union = "oneOf"
        if "allOf" in node:
            parts = node["allOf"]
            if len(parts) == 1 and isinstance(parts[0], dict) and not set(parts[0]) & (set(node) - {"allOf"}):
                del node["allOf"]
                node.update(parts[0])  # a lone allOf is only a wrapper
            else:
                self.drop(node, pointer, "allOf", "allOf is not supported by OpenAI strict mode")
        if "$ref" in node and len(node) > 1:
            if "anyOf" in node:
                raise NotStrictCompatibleError(pointer, "$ref beside anyOf")
            # Strict mode refuses siblings of $ref (such as a description), but allows them
            # beside anyOf.
            node["anyOf"] = [{"$ref": node.pop("$ref")}]
        return union

    def _object(self, node: dict[str, Any], pointer: str) -> None:
        properties = node.get("properties")
        extra = node.get("additionalProperties")
        free_form = extra is True or isinstance(extra, dict) or (properties is None and extra is None)
        if not properties and free_form:
            # No declared properties, and others allowed: a map (dict[str, int]) or any object.
            raise NotStrictCompatibleError(pointer, "an object with free-form keys")
        properties = properties if isinstance(properties, dict) else {}
        node["type"] = node.get("type", "object")
        required = set(node.get("required") or ())
        rewritten: dict[str, Any] = {}
        for name, child in properties.items():
            # Asked before the rewrite, which drops what says so (such as a null default).
            optional = name not in required and not admits_null(child, self.root)
            new = self.node(child, _pointer(pointer, "properties", name))
            rewritten[name] = _nullable(new) if optional else new
        node["properties"] = rewritten
        node["required"] = list(rewritten)
        node["additionalProperties"] = False

    def _array(self, node: dict[str, Any], pointer: str) -> None:
        if "prefixItems" in node:
            raise NotStrictCompatibleError(pointer, "a tuple (prefixItems)")
        items = node.get("items")
        if not isinstance(items, dict) or not any(key in items for key in _TYPED_BY):
            raise NotStrictCompatibleError(pointer, "an array of values of any type")
        node["items"] = self.node(items, _pointer(pointer, "items"))
