"""MCP tool annotations declared on a tool, and confirmation implying ``destructiveHint``."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolbridge import Bridge, tool
from toolbridge._mcp.server import _mcp_tools


def test_declared_annotations_reach_the_mcp_listing_and_confirmation_implies_destructive(
    journal_path: Path,
) -> None:
    tools = {
        "get-customer": tool.step(
            run=lambda a: a, annotations={"readOnlyHint": True, "openWorldHint": False}
        ),
        "refund": tool.step(run=lambda a: a, requires_confirmation=True),
        "archive": tool.step(
            run=lambda a: a,
            requires_confirmation=True,
            annotations={"destructiveHint": False, "idempotentHint": True},
        ),
        "plain": lambda: 1,
    }
    listed = _mcp_tools(Bridge(journal=journal_path, tools=tools))
    shown = {
        name: t.annotations.model_dump(by_alias=True, exclude_none=True)
        for name, t in listed.items()
        if t.annotations
    }
    assert shown["get-customer"] == {"title": "Get customer", "readOnlyHint": True, "openWorldHint": False}
    assert shown["refund"] == {"title": "Refund", "destructiveHint": True, "readOnlyHint": False}
    assert shown["archive"] == {
        "title": "Archive",
        "destructiveHint": False,  # what the tool says wins
        "idempotentHint": True,
        "readOnlyHint": False,
    }
    assert shown["plain"] == {"title": "Plain"}
    assert listed["get-customer"].name == "get-customer"  # the name as given


def test_annotations_are_checked_when_declared() -> None:
    with pytest.raises(ValueError, match="unknown annotation 'readonly'"):
        tool.step(run=lambda a: a, annotations={"readonly": True})
    with pytest.raises(TypeError, match=r"annotations\['destructiveHint'\] must be True or False"):
        tool.step(run=lambda a: a, annotations={"destructiveHint": "yes"})
