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

__all__ = ["serve_journal"]

HOST = "127.0.0.1"


class _EmbeddedServer(uvicorn.Server):
    """uvicorn without its signal handlers: the host application owns SIGINT and SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _listen(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
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
        The view's URL (``port=0`` picks a free port).

    Raises:
        OSError: when the port cannot be bound.
    """
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise ValueError("port must be a whole number from 0 to 65535")
    sock = _listen(port)
    options = {} if tls is None else tls.uvicorn_options()
    config = uvicorn.Config(ui_app(journal), log_level="warning", lifespan="off", **options)  # type: ignore[arg-type]
    server = _EmbeddedServer(config)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        yield f"{'http' if tls is None else 'https'}://{HOST}:{sock.getsockname()[1]}/"
    finally:
        server.should_exit = True
        try:
            await task
        finally:
            sock.close()
