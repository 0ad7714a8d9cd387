"""Walking JSON Schemas: local references, closed objects, and what "optional" allows.

Pure functions over JSON Schema dicts, shared by validation (:mod:`_schema`, :mod:`_tool`)
and by tool definitions (:mod:`_definitions`, :mod:`_openai_strict`). None of them mutates
its argument.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["admits_null", "close_objects", "inline_root_ref", "resolve"]

MAX_REF_HOPS = 32
"""References followed in a row before a schema is treated as unknown (a ``$ref`` cycle)."""

# Keywords whose subschemas describe the same value as their parent, only in part: closing
# one of them on its own would reject the properties its siblings declare.
_PARTIAL_VIEWS = ("allOf", "if", "then", "else")
_OTHER_PROPERTY_SOURCES = (
    "$ref",
    "allOf",
    "if",
    "dependentSchemas",
    "patternProperties",
    "unevaluatedProperties",
)
_SUBSCHEMA = ("items", "contains", "additionalProperties", "unevaluatedItems", "propertyNames")


def resolve(node: Any, root: Any) -> Any:
    """The schema a local ``$ref`` (``#`` or ``#/$defs/Name``) points to; other nodes as they are.

    Returns ``None`` for a reference that cannot be followed (remote, missing, or a cycle):
    callers treat that as a schema they know nothing about.
    """
    for _ in range(MAX_REF_HOPS):
        ref = node.get("$ref") if isinstance(node, dict) else None
        if not isinstance(ref, str):
            return node
        if not ref.startswith("#"):
            return None
        node = root
        for part in filter(None, ref[1:].split("/")):
            key = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
    return None


def inline_root_ref(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with a root ``{"$ref": "#/$defs/X"}`` replaced by ``X`` itself.

    pydantic writes a recursive model as a root reference; model APIs want ``type: object``
    at the root. The ``$defs`` stay, so references inside ``X`` still resolve.
    """
    if not isinstance(schema.get("$ref"), str):
        return schema
    target = resolve(schema, schema)
    if not isinstance(target, dict):
        return schema
    merged = {key: value for key, value in schema.items() if key != "$ref"}
    for key, value in target.items():
        merged.setdefault(key, value)
    return merged


def close_objects(schema: dict[str, Any], *, override: bool = True) -> dict[str, Any]:
    """A copy of ``schema`` in which every object that lists its ``properties`` takes no others.

    Objects without ``properties`` are maps (``dict[str, int]``) and stay open; so do objects
    whose properties also come from elsewhere (``allOf``, a ``$ref`` beside them), where
    closing one part would reject what the other declares.

    Args:
        schema: The schema to close.
        override: Also close objects that say ``additionalProperties: true``.
    """
    closed = copy.deepcopy(schema)
    _close(closed, closable=True, override=override)
    return closed


def _close(node: Any, *, closable: bool, override: bool) -> None:
    if not isinstance(node, dict):
        return
    for key in ("properties", "$defs", "definitions", "patternProperties"):
        children = node.get(key)
        if isinstance(children, dict):
            for child in children.values():
                _close(child, closable=True, override=override)
    for key in ("anyOf", "oneOf"):
        for child in node.get(key) or ():
            # A branch stands alone unless its parent declares properties of its own.
            _close(child, closable="properties" not in node, override=override)
    for key in _PARTIAL_VIEWS:
        children = node.get(key)
        for child in children if isinstance(children, list) else [children]:
            _close(child, closable=False, override=override)
    for child in node.get("prefixItems") or ():
        _close(child, closable=True, override=override)
    for key in _SUBSCHEMA:
        _close(node.get(key), closable=True, override=override)
    if not closable or not isinstance(node.get("properties"), dict):
        return
    if any(key in node for key in _OTHER_PROPERTY_SOURCES):
        return
    extra = node.get("additionalProperties", True)
    if extra is True and (override or "additionalProperties" not in node):
        node["additionalProperties"] = False


def admits_null(node: Any, root: Any) -> bool:
    """Whether ``null`` can be valid for ``node`` (unknown schemas are assumed to admit it)."""
    node = resolve(node, root)
    if node is None or node is True or not isinstance(node, dict):
        return node is not False
    kind = node.get("type")
    if kind is not None and kind != "null" and not (isinstance(kind, list) and "null" in kind):
        return False
    if "enum" in node and None not in node["enum"]:
        return False
    if "const" in node and node["const"] is not None:
        return False
    for key in ("anyOf", "oneOf"):
        if key in node and not any(admits_null(branch, root) for branch in node[key]):
            return False
    return all(admits_null(part, root) for part in node.get("allOf") or ())
