"""The host's own calls of registered tools, each a step of a run (``Bridge.call_tool``)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from toolbridge._bridge.lifecycle import Lifecycle
from toolbridge._bridge.parts import Parts
from toolbridge._calls.host import call_registered_tool
from toolbridge._durable.triggers import EnterRun
from toolbridge._durations import Duration
from toolbridge._options import ToolOptions
from toolbridge._records import check_run_id

__all__ = ["HostCalls"]


class HostCalls:
    """Calls a bridge's registered tools from the host.

    Args:
        parts: The bridge's parts (its runs, tools and approvals).
        life: The bridge's lifecycle (its services while open).
        enter: Enters a run (the bridge's ``run``).
    """

    def __init__(self, parts: Parts, life: Lifecycle, enter: EnterRun) -> None:
        self._parts = parts
        self._life = life
        self._enter = enter

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | Sequence[Any] | None,
        *,
        run_id: str | None,
        tool_options: ToolOptions | None,
        wait: Duration | None,
    ) -> Any:
        """Enter the run and call ``name`` in it, as ``Bridge.call_tool`` says."""
        run_id = check_run_id(run_id or uuid.uuid4().hex)
        async with self._enter(run_id, wait=wait):
            state = self._parts.runs.get(run_id)
            assert state is not None  # entering has checked that the bridge is open
            return await call_registered_tool(
                self._life.require_open().steps_factory,
                state,
                self._parts.registry.tools,
                name,
                arguments,
                tool_options or ToolOptions(),
                self._parts.approval_hub,
            )
