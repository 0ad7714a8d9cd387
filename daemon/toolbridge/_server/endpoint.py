"""Where a bridge serves: a Unix socket in a private directory, or a TCP address.

The endpoint owns the gRPC server's lifetime and the private socket directory it may create,
so that the bridge only says where to serve and when to stop.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from grpc import aio

from toolbridge._errors import ToolbridgeError
from toolbridge._sandbox.orphans import kill_processes_naming, owned_name, sweep_dead_owners
from toolbridge._server.doors import Doors
from toolbridge._server.service import Authenticate, start_server
from toolbridge._server.transport import server_options
from toolbridge._tls import ClearTextWarning, TLSConfig, check_clear_text

__all__ = ["Endpoint"]

SOCKET_DIR_PREFIX = "toolbridge-"


class Endpoint:
    """A gRPC server on one address, started and stopped with its bridge.

    Args:
        socket: A Unix socket path; by default one in a fresh private (0700) directory.
        listen: A TCP ``HOST:PORT`` instead of a socket.
        max_bytes: The largest call the transport reads (see ``start_server``).
        idle: Seconds a connection may carry no call before it is closed.
        tls: Serve ``listen`` with TLS (see :class:`TLSConfig`).
        insecure: Serve a non-loopback ``listen`` without TLS all the same (with a warning).

    Raises:
        ValueError: for limits out of range (see ``server_options``).
    """

    def __init__(
        self,
        *,
        socket: str | os.PathLike[str] | None,
        listen: str | None,
        max_bytes: int,
        idle: float,
        tls: TLSConfig | None = None,
        insecure: bool = False,
    ) -> None:
        server_options(max_request_bytes=max_bytes, connection_idle=idle)  # bad limits fail here, at once
        self._limits = (max_bytes, idle)
        self.tls: TLSConfig | None = None
        self.insecure = False
        self._server: aio.Server | None = None
        self._private_dir: Path | None = None
        self._doors_dir: Path | None = None
        self.doors: Doors | None = None
        """Each command's own socket (see _server.doors), when serving on Unix sockets."""
        self.socket: Path | None = None
        self.listen: str | None = None
        self.move(socket=socket, listen=listen, tls=tls, insecure=insecure)
        self.address = ""
        """Where sandboxes reach the server once it runs: ``unix:PATH``, ``HOST:PORT`` or
        ``tls://HOST:PORT``."""

    @property
    def serving(self) -> bool:
        return self._server is not None

    @property
    def socket_dir(self) -> Path | None:
        """The directory holding the socket (lent to bubblewrap sandboxes), if serving on one."""
        return None if self.listen is not None or self.socket is None else self.socket.parent

    def move(
        self,
        *,
        socket: str | os.PathLike[str] | None,
        listen: str | None,
        tls: TLSConfig | None = None,
        insecure: bool = False,
    ) -> None:
        """Serve somewhere else than first configured; only before :meth:`start`.

        Raises:
            ValueError: when both a socket and a TCP address are given, or TLS without a
                TCP address.
            TLSError: for clear text off loopback without ``insecure``.
            ToolbridgeError: when the server already runs.
        """
        if self._server is not None:
            raise ToolbridgeError("the bridge is already serving")
        if socket is not None and listen is not None:
            raise ValueError("pass socket= or listen=, not both")
        if tls is not None and listen is None:
            raise ValueError("TLS is for a TCP address: pass listen= with the certificate")
        if listen is not None and tls is None:
            check_clear_text(listen, insecure=insecure)  # refused here, at once; warned at start
        self.socket = None if socket is None else Path(socket)
        self.listen = listen
        self.tls = tls
        self.insecure = insecure

    async def start(self, authenticate: Authenticate) -> str:
        """Start serving; returns the bound address (with the real port for ``:0``).

        Args:
            authenticate: Resolves a call's token to the scope it grants.
        """
        tls = None
        if self.listen is not None:
            address = self.listen
            tls = self.tls
            if tls is None and (warning := check_clear_text(self.listen, insecure=self.insecure)):
                warnings.warn(warning, ClearTextWarning, stacklevel=2)
        else:
            # Named after this daemon's pid: a daemon killed with SIGKILL cannot remove
            # its directories, so the next one to start removes those of dead owners, and
            # kills what the dead ones' commands left running (see orphans.py).
            kill_processes_naming(sweep_dead_owners(Path(tempfile.gettempdir()), SOCKET_DIR_PREFIX))
            if self.socket is None:
                self._private_dir = _private_dir()
                self.socket = self._private_dir / "bridge.sock"
            # The commands' doors live beside a default socket, or privately beside a chosen one.
            self._doors_dir = self._private_dir or _private_dir()
            max_bytes, idle = self._limits
            self.doors = Doors(authenticate, parent=self._doors_dir, max_bytes=max_bytes, idle=idle)
            address = f"unix:{self.socket}"
        self._server, bound = await start_server(
            authenticate,
            [address],
            max_request_bytes=self._limits[0],
            connection_idle=self._limits[1],
            tls=tls,
        )
        self.address = bound[0]
        return self.address

    async def stop(self, grace: float) -> None:
        """Stop serving: calls in flight get ``grace`` seconds, then are cancelled."""
        server, self._server = self._server, None
        doors, self.doors = self.doors, None
        try:
            await asyncio.gather(
                *([] if server is None else [server.stop(grace=grace)]),
                *([] if doors is None else [doors.stop(grace)]),
            )
        finally:
            if self._doors_dir is not None and self._doors_dir != self._private_dir:
                shutil.rmtree(self._doors_dir, ignore_errors=True)
            self._doors_dir = None
            if self._private_dir is not None:
                shutil.rmtree(self._private_dir, ignore_errors=True)
                self._private_dir, self.socket = None, None


def _private_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix=owned_name(SOCKET_DIR_PREFIX)))
