"""Serving the web view on loopback: from ``toolbridge ui``, or inside an open bridge."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator

import uvicorn

from toolbridge._tls import TLSConfig
from toolbridge._ui.app import ui_app
from toolbridge._ui.journal import Journal
from toolbridge._ui.login import Login

__all__ = ["listen", "serve_journal"]

HOST = "127.0.0.1"


class _EmbeddedServer(uvicorn.Server):
    """uvicorn without its signal handlers: the host application owns SIGINT and SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def listen(port: int) -> socket.socket:
    """The view's listening socket on ``127.0.0.1:port``: the one place it is made."""
    # IPPROTO_TCP by name: asyncio sets TCP_NODELAY on accepted sockets only when the socket
    # says it is TCP, and without it a keep-alive client waits on Nagle for every answer.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted sockets
    try:
        sock.bind((HOST, port))
        # Listening before uvicorn starts: a browser that connects at once waits in the backlog.
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


@contextlib.asynccontextmanager
async def serve_journal(
    journal: Journal, *, port: int = 0, tls: TLSConfig | None = None
) -> AsyncIterator[str]:
    """Serve the web view of ``journal`` (open) on ``127.0.0.1:port`` while the block runs
    (over TLS with ``tls``: the same files as the gRPC face's, see ``TLSConfig``).

    Yields:
        The view's login URL, ``http://127.0.0.1:PORT/?token=...`` (``port=0`` picks a free
        port): opening it once logs a browser in; nothing else can.

    Raises:
        OSError: when the port cannot be bound.
    """
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise ValueError("port must be a whole number from 0 to 65535")
    sock = listen(port)
    login = Login()
    options = {} if tls is None else tls.uvicorn_options()
    config = uvicorn.Config(ui_app(journal, login), log_level="warning", lifespan="off", **options)  # type: ignore[arg-type]
    server = _EmbeddedServer(config)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        yield f"{'http' if tls is None else 'https'}://{HOST}:{sock.getsockname()[1]}/?token={login.token}"
    finally:
        server.should_exit = True
        try:
            await task
        finally:
            sock.close()
