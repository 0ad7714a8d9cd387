"""Where a value holds secrets: by its schema (``writeOnly``, ``format: "password"``) or its type.

A tool's arguments and results are journaled, traced and shown. The parts its author marked
secret must not be: pydantic's ``SecretStr``/``SecretBytes`` (whose JSON Schema is
``{"format": "password", "writeOnly": true}``), or any JSON Schema node with
``writeOnly: true`` or ``format: "password"``. This module finds those parts as paths into
the JSON value, and rewrites them; what replaces them (a keyed hash, a seal) is the
caller's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pydantic

__all__ = ["Path", "replace_at", "schema_secret_paths", "secret_paths_of_python"]

Path = tuple[str | int, ...]
MAX_DEPTH = 32


def _is_secret(node: Mapping[str, Any]) -> bool:
    return node.get("writeOnly") is True or node.get("format") == "password"


def schema_secret_paths(schema: Mapping[str, Any] | None, value: Any) -> list[Path]:
    """The paths of ``value`` that ``schema`` marks secret (present in the value)."""
    if not schema:
        return []
    defs = {**schema.get("$defs", {}), **schema.get("definitions", {})}
    found: list[Path] = []
    _walk_schema(schema, value, (), defs, found, 0)
    return found


def _resolve(node: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and "/" in ref:
        target = defs.get(ref.rsplit("/", 1)[1])
        if isinstance(target, Mapping):
            return {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _walk_schema(
    node: Any, value: Any, path: Path, defs: Mapping[str, Any], found: list[Path], depth: int
) -> None:
    if not isinstance(node, Mapping) or depth > MAX_DEPTH:
        return
    node = _resolve(node, defs)
    if _is_secret(node):
        if value is not None:
            found.append(path)
        return
    for key in ("anyOf", "oneOf", "allOf"):
        for option in node.get(key, ()):
            option = _resolve(option, defs) if isinstance(option, Mapping) else option
            if isinstance(option, Mapping) and _is_secret(option) and value is not None:
                found.append(path)
                return
            _walk_schema(option, value, path, defs, found, depth + 1)
    if isinstance(value, Mapping):
        properties = node.get("properties", {})
        extra = node.get("additionalProperties")
        for name, item in value.items():
            sub = properties.get(name, extra)
            _walk_schema(sub, item, (*path, name), defs, found, depth + 1)
    elif isinstance(value, list):
        items = node.get("items")
        prefix = node.get("prefixItems", [])
        for index, item in enumerate(value):
            sub = prefix[index] if index < len(prefix) else items
            _walk_schema(sub, item, (*path, index), defs, found, depth + 1)


def secret_paths_of_python(value: Any) -> list[tuple[Path, str]]:
    """Each ``SecretStr``/``SecretBytes`` in a Python value: its path and its clear text.

    Models and dataclasses are walked by field, as they dump to JSON.
    """
    return list(_walk_python(value, (), 0))


def _walk_python(value: Any, path: Path, depth: int) -> Iterator[tuple[Path, str]]:
    if depth > MAX_DEPTH:
        return
    if isinstance(value, pydantic.SecretStr):
        yield path, value.get_secret_value()
    elif isinstance(value, pydantic.SecretBytes):
        yield path, value.get_secret_value().decode("utf-8", "replace")
    elif isinstance(value, pydantic.BaseModel):
        yield from _walk_python(value.model_dump(mode="python"), path, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _walk_python(getattr(value, field.name), (*path, field.name), depth + 1)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk_python(item, (*path, str(key)), depth + 1)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _walk_python(item, (*path, index), depth + 1)


def replace_at(value: Any, paths: list[Path], replace: Callable[[Path, Any], Any]) -> Any:
    """A copy of the JSON ``value`` with the leaf at each path replaced by ``replace(path, leaf)``."""
    if not paths:
        return value
    if () in paths:
        return replace((), value)
    by_head: dict[str | int, list[Path]] = {}
    for path in paths:
        by_head.setdefault(path[0], []).append(path[1:])
    if isinstance(value, Mapping):
        return {key: _replace_under(item, by_head.get(key), (key,), replace) for key, item in value.items()}
    if isinstance(value, list):
        return [
            _replace_under(item, by_head.get(index), (index,), replace) for index, item in enumerate(value)
        ]
    return value


def _replace_under(
    item: Any, rest: list[Path] | None, head: Path, replace: Callable[[Path, Any], Any]
) -> Any:
    if rest is None:
        return item
    return replace_at(item, rest, lambda path, leaf: replace((*head, *path), leaf))
