"""MCP tool annotations a tool declares (``annotations={"readOnlyHint": True}``).

They are hints for an MCP client (the spec says a client must not trust them for security):
whether the tool only reads, may destroy, is idempotent, reaches an open world. Checked when
the tool is declared, so a typo fails then rather than being silently ignored by the client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["HINTS", "check_annotations", "mcp_annotations"]

HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def check_annotations(annotations: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``annotations`` as a plain dict, checked.

    Raises:
        TypeError: for a mapping that is not one, or a hint that is not a boolean.
        ValueError: for an unknown key (naming those allowed).
    """
    if annotations is None:
        return None
    if not isinstance(annotations, Mapping):
        raise TypeError(f"annotations= takes a dict such as {{'readOnlyHint': True}}, got {annotations!r}")
    checked: dict[str, Any] = {}
    for key, value in annotations.items():
        if key == "title":
            if not isinstance(value, str):
                raise TypeError(f"annotations['title'] must be a string, got {value!r}")
        elif key in HINTS:
            if not isinstance(value, bool):
                raise TypeError(f"annotations[{key!r}] must be True or False, got {value!r}")
        else:
            raise ValueError(f"unknown annotation {key!r}: use title, {', '.join(HINTS)}")
        checked[key] = value
    return checked


def mcp_annotations(
    annotations: Mapping[str, Any] | None, *, requires_confirmation: bool, title: str
) -> dict[str, Any]:
    """What an MCP client is shown: the declared annotations, a title, and ``destructiveHint``
    for a tool that needs a person's confirmation unless the tool said otherwise (a tool
    someone must approve is one whose effect matters)."""
    shown: dict[str, Any] = {"title": title, **(annotations or {})}
    if requires_confirmation:
        shown.setdefault("destructiveHint", True)
        shown.setdefault("readOnlyHint", False)
    return shown
