"""A socket of its own for each command, so that a command's connections are its own to spend.

A connection says nothing of the command that opened it until it carries a call, and gRPC
has no hook at accept time, so one shared socket can cap connections only for everyone at
once: one sandbox filling that cap locks every command that connects after it out. So
each command gets a door: a gRPC server of its own (the same servicer, about 0.25 ms and
70 KiB to start) on a Unix socket in a directory of its own, capped at the command's
``ToolOptions.max_connections`` (gRPC's ``grpc.max_allowed_incoming_connections``). Its
environment names that socket, and a bubblewrap sandbox sees that directory and no other
socket of the daemon's; the door takes only its own command's token. When the command ends
its door stops taking calls, lets the calls still in flight finish, and goes, with the
connections its sandbox left open.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from grpc import aio

from toolbridge._calls.scope import CommandScope
from toolbridge._server.service import Authenticate, start_server

__all__ = ["Doors"]

SOCKET_NAME = "bridge.sock"

CLOSE_GRACE = 3600.0
"""Seconds an ended command's calls still in flight may take; its door closes as soon as
they are done (and at once, with the bridge's own grace, when the bridge stops)."""


class Doors:
    """Opens and closes the doors of one bridge's commands, under ``parent``.

    Args:
        authenticate: Token -> the scope it grants, as for the bridge's own server.
        parent: A private directory of the daemon's, to hold each door's directory.
        max_bytes: The largest call the transport reads.
        idle: Seconds a connection may carry no call before it is closed.
    """

    def __init__(self, authenticate: Authenticate, *, parent: Path, max_bytes: int, idle: float) -> None:
        self._authenticate = authenticate
        self._parent = parent
        self._limits = (max_bytes, idle)
        self._open: set[aio.Server] = set()
        self._closing: set[asyncio.Task[None]] = set()

    def reserve(self) -> tuple[str, Path]:
        """A directory for a door opened later (a warm sandbox is shown it as it starts), and
        the address the door will have there."""
        directory = Path(tempfile.mkdtemp(prefix="command-", dir=self._parent))
        return f"unix:{directory / SOCKET_NAME}", directory

    @contextlib.asynccontextmanager
    async def open(
        self, scope: CommandScope, max_connections: int, directory: Path | None = None
    ) -> AsyncIterator[tuple[str, Path]]:
        """A door for the command of ``scope`` while it runs: its address and its directory
        (``directory``, made by :meth:`reserve`, or a new one)."""
        directory = directory or self.reserve()[1]
        authenticate = self._authenticate

        async def own_token_only(token: str) -> CommandScope | None:
            granted = await authenticate(token)
            return granted if granted is scope else None

        try:
            server, (address,) = await start_server(
                own_token_only,
                [f"unix:{directory / SOCKET_NAME}"],
                max_request_bytes=self._limits[0],
                connection_idle=self._limits[1],
                max_connections=max_connections,
            )
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        self._open.add(server)
        try:
            yield address, directory
        finally:
            closing = asyncio.get_running_loop().create_task(self._close(server, directory))
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)

    async def _close(self, server: aio.Server, directory: Path) -> None:
        try:
            await server.stop(CLOSE_GRACE)
        finally:
            self._open.discard(server)
            shutil.rmtree(directory, ignore_errors=True)

    async def stop(self, grace: float) -> None:
        """Close every door: calls in flight get ``grace`` seconds, then are cancelled."""
        # A second stop with a shorter grace cuts the first one's short.
        await asyncio.gather(*(server.stop(grace) for server in list(self._open)))
        await asyncio.gather(*list(self._closing), return_exceptions=True)
