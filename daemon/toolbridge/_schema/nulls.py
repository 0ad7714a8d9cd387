"""A ``null`` sent for an optional property that does not accept null means "not given".

A model API in strict mode (OpenAI's) must send every property, so an optional argument it
means to leave out arrives as ``null``. Dropping such a ``null`` before validation lets the
default apply, and everything else is still validated against the tool's own schema.

Reading the schema for every call would cost more than validating the call (a JSON Schema is
a graph of references and unions), so :class:`NullOmission` compiles it once into a plan that
visits only the places where a droppable null can be.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolbridge._schema.walk import admits_null, resolve

__all__ = ["NullOmission", "omit_null_optionals"]


@dataclass(eq=False)
class _Plan:
    """Where, in a value matching one schema node, a null may be dropped."""

    droppable: frozenset[str] = frozenset()  # optional properties that refuse null
    declared: frozenset[str] = frozenset()  # every declared property (the rest are "extra")
    properties: dict[str, _Plan] = field(default_factory=dict)
    extra: _Plan | None = None  # additionalProperties
    items: _Plan | None = None

    def children(self) -> list[_Plan]:
        found = list(self.properties.values())
        return found + [plan for plan in (self.extra, self.items) if plan is not None]


class NullOmission:
    """What to drop from values of one schema, compiled once."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self._root = schema
        self._by_ref: dict[str, _Plan] = {}
        self._plans: list[_Plan] = []
        plan = self._compile(schema)
        useful = self._prune()
        self._plan = plan if plan in useful else None

    @property
    def needed(self) -> bool:
        """Whether any value of the schema can hold a null to drop."""
        return self._plan is not None

    def apply(self, value: Any) -> Any:
        """``value`` without its droppable nulls; ``value`` itself when there were none."""
        return value if self._plan is None else _apply(value, self._plan)

    def _compile(self, node: Any) -> _Plan:
        ref = node.get("$ref") if isinstance(node, dict) else None
        if isinstance(ref, str) and ref in self._by_ref:
            return self._by_ref[ref]  # a recursive schema: the plan refers to itself
        plan = _Plan()
        self._plans.append(plan)
        if isinstance(ref, str):
            self._by_ref[ref] = plan
        shape = _object_branch(node, self._root)
        if shape is not None:
            properties: dict[str, Any] = shape.get("properties") or {}
            required = set(shape.get("required") or ())
            plan.declared = frozenset(properties)
            plan.droppable = frozenset(
                name
                for name, sub in properties.items()
                if name not in required and not admits_null(sub, self._root)
            )
            plan.properties = {name: self._compile(sub) for name, sub in properties.items()}
            extra = shape.get("additionalProperties")
            if isinstance(extra, dict):
                plan.extra = self._compile(extra)
        items = _array_items(node, self._root)
        if items is not None:
            plan.items = self._compile(items)
        return plan

    def _prune(self) -> set[_Plan]:
        """Cut every branch below which nothing can be dropped; return the plans that stay."""
        useful = {plan for plan in self._plans if plan.droppable}
        changed = True
        while changed:  # a fixed point, since recursive schemas make cycles
            changed = False
            for plan in self._plans:
                if plan not in useful and any(child in useful for child in plan.children()):
                    useful.add(plan)
                    changed = True
        for plan in self._plans:
            plan.properties = {name: child for name, child in plan.properties.items() if child in useful}
            plan.extra = plan.extra if plan.extra in useful else None
            plan.items = plan.items if plan.items in useful else None
        return useful


def omit_null_optionals(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` without the nulls given for optional properties of ``schema`` that refuse null."""
    return NullOmission(schema).apply(value)


def _object_branch(node: Any, root: Any) -> dict[str, Any] | None:
    node = resolve(node, root)
    if not isinstance(node, dict):
        return None
    if isinstance(node.get("properties"), dict) or isinstance(node.get("additionalProperties"), dict):
        return node
    branches = [resolve(b, root) for b in (node.get("anyOf") or node.get("oneOf") or ())]
    objects = [b for b in branches if isinstance(b, dict) and isinstance(b.get("properties"), dict)]
    # With several object branches, which one the value meant is the validator's call.
    return objects[0] if len(objects) == 1 else None


def _array_items(node: Any, root: Any) -> Any:
    node = resolve(node, root)
    if not isinstance(node, dict):
        return None
    if isinstance(node.get("items"), dict):
        return node["items"]
    branches = [resolve(b, root) for b in (node.get("anyOf") or node.get("oneOf") or ())]
    arrays = [b for b in branches if isinstance(b, dict) and isinstance(b.get("items"), dict)]
    return arrays[0]["items"] if len(arrays) == 1 else None


def _apply(value: Any, plan: _Plan) -> Any:
    if isinstance(value, dict):
        result: dict[str, Any] | None = None
        for name in plan.droppable:
            if name in value and value[name] is None:
                result = dict(value) if result is None else result
                del result[name]
        for name, item in value.items():
            child = plan.properties.get(name) if name in plan.declared else plan.extra
            if child is None or item is None:
                continue
            new = _apply(item, child)
            if new is not item:
                result = dict(value) if result is None else result
                result[name] = new
        return value if result is None else result
    if isinstance(value, list) and plan.items is not None:
        new_items = [_apply(item, plan.items) for item in value]
        if any(new is not old for new, old in zip(new_items, value, strict=True)):
            return new_items
    return value
