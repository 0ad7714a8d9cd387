"""A bridge's life: opened (journal, endpoint, services), serving, drained and closed.

Entering a bridge opens its journal, starts the endpoint sandboxes call and builds the
services commands run with; leaving it refuses new calls, gives those in flight their grace,
stops serving and closes the journal, whatever failed on the way.
"""

from __future__ import annotations

import os
from pathlib import Path

from toolbridge._bridge.parts import Parts
from toolbridge._calls.scope import CommandScope
from toolbridge._commands.services import Services
from toolbridge._durable.steps import nested_steps
from toolbridge._errors import ToolbridgeError
from toolbridge._journal.base import Journal
from toolbridge._sandbox.runtime.python import build_runtime
from toolbridge._secrets import key_file_beside, state_dir

__all__ = ["Lifecycle"]


class Lifecycle:
    """Opens and closes a bridge's parts; holds the services it has while open."""

    def __init__(self, parts: Parts) -> None:
        self._parts = parts
        self.services: Services | None = None

    def require_open(self) -> Services:
        """The open bridge's services.

        Raises:
            ToolbridgeError: when the bridge is not open.
        """
        if self.services is None:
            raise ToolbridgeError("the bridge is not open: use `async with Bridge(...)`")
        return self.services

    async def open(self) -> None:
        """Open the journal and start serving; the journal is closed again if serving fails."""
        journal = self._parts.journal
        await journal.open()
        try:
            await self._serve()
        except BaseException:
            await journal.close()
            raise
        self._parts.triggers.opened()
        try:
            await self._parts.serving.open()
        except BaseException:
            await self.close()
            raise

    async def _serve(self) -> None:
        parts = self._parts
        address = await parts.endpoint.start(self.authenticate)
        self.services = Services(
            journal=parts.journal,
            launcher=parts.launcher,
            runtime=build_runtime(),
            tokens=parts.tokens,
            address=address,
            socket_dir=parts.endpoint.socket_dir,
            doors=parts.endpoint.doors,
            events=parts.events,
            steps_factory=nested_steps(parts.events, parts.registry.functions, parts.journal.functions),
            approvals=parts.approval_hub,
            functions=parts.registry.functions,
            state_paths=(*_state_paths(parts.journal), *([parts.key_file] if parts.key_file else [])),
            warm=parts.warm if parts.warm.size else None,
        )

    async def authenticate(self, token: str) -> CommandScope | None:
        """The scope a presented token grants, or ``None``; refused while draining."""
        self._parts.shutdown.refuse_if_draining()
        # A running command's token first (in memory), then a sidecar token (in the journal).
        return self._parts.tokens.resolve(token) or await self._parts.sidecar.resolve(token)

    async def close(self) -> None:
        """Refuse new calls, give those in flight the grace, stop serving, close the journal."""
        parts = self._parts
        try:
            await parts.serving.stop()  # no new invocations; those in flight get the grace
            await parts.shutdown.drain(parts.background, stop_serving=parts.endpoint.stop)
            await parts.serving.unregister()
            await parts.runs.close()
            await parts.sidecar.close()
        finally:
            await parts.warm.close()  # every waiting sandbox gone
            parts.shutdown.remove()
            # Whatever failed above, the journal is closed: its connection's thread would
            # otherwise keep the host process from exiting.
            self.services = None
            await parts.journal.close()


def _state_paths(journal: Journal) -> tuple[Path, ...]:
    """The daemon's own files, hidden from every sandbox (see ``LaunchSpec.hidden_paths``)."""
    found: list[Path] = [state_dir()]
    path = getattr(journal, "path", None)
    if path is not None:
        base = os.path.abspath(path)
        found += [Path(base + suffix) for suffix in ("", "-wal", "-shm", "-journal")]
        found.append(key_file_beside(base))
    return tuple(found)
