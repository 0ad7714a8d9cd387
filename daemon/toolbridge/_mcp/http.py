"""The MCP face over Streamable HTTP: stateless, JSON responses, a bearer token on every request.

Each POST to ``/mcp`` is answered on its own (no session), with one JSON body, so progress
notifications do not reach HTTP clients (they ride stdio, or SSE, which this face does not
use). Every request must carry ``Authorization: Bearer <token>``, loopback included (any
local process, a process-launcher sandbox among them, can reach loopback): either the
server's own token, made at random when it starts and printed to whoever started it
(``TOOLBRIDGE_MCP_TOKEN=``), which may call every tool and decide requests through
elicitation; or a sidecar token (``toolbridge token mint``), checked against the journal on
every request, so a revoked or expired one stops working at once. Only an explicit
``--no-auth`` on a loopback address serves without one.
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
from typing import Any

from mcp.server.lowlevel import Server
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from toolbridge import Bridge
from toolbridge._mcp.server import GRANT_STATE_KEY

__all__ = ["BearerTokens", "bind", "is_loopback", "mcp_http_app", "new_token", "parse_host_port"]

MCP_PATH = "/mcp"


def parse_host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as a pair.

    Raises:
        ValueError: naming the expected form.
    """
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT (for example 127.0.0.1:8765), got {text!r}")
    return host, int(port)


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def new_token() -> str:
    """A server token: what ``toolbridge mcp --http`` prints for its clients."""
    return f"tbm1.{secrets.token_urlsafe(32)}"


class BearerTokens:
    """ASGI middleware: checks ``Authorization: Bearer`` against the server's own token and
    the bridge's sidecar tokens.

    The server's token grants everything (no grant on the scope). The grant of a valid
    sidecar token goes on the request's scope state, where the MCP handlers read it (it
    limits the tools listed and callable, and the run a call may name).

    Args:
        app: The MCP app.
        bridge: The open bridge whose journal holds the sidecar tokens.
        token: The server's own token; ``None`` serves requests without a token too
            (``--no-auth``, loopback only).
    """

    def __init__(self, app: ASGIApp, bridge: Bridge, *, token: str | None) -> None:
        self._app = app
        self._bridge = bridge
        self._token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        header = Headers(scope=scope).get("authorization")
        if header is None and self._token is None:
            await self._app(scope, receive, send)
            return
        scheme, _, token = (header or "").partition(" ")
        token = token.strip()
        if (
            scheme.lower() == "bearer"
            and self._token is not None
            and secrets.compare_digest(token.encode(), self._token.encode())
        ):
            await self._app(scope, receive, send)
            return
        grant = await self._bridge.check_token(token) if scheme.lower() == "bearer" else None
        if grant is None:
            reason = (
                "this server needs Authorization: Bearer <token>: the TOOLBRIDGE_MCP_TOKEN it "
                "printed, or a sidecar token from `toolbridge token mint`"
                if header is None
                else "the token is unknown, expired or revoked"
            )
            response = JSONResponse(
                {"error": "invalid_token", "error_description": reason},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})[GRANT_STATE_KEY] = grant
        await self._app(scope, receive, send)


def mcp_http_app(server: Server[Any], bridge: Bridge, *, host: str, token: str | None) -> ASGIApp:
    """The ASGI app serving ``server`` at ``/mcp``; every request needs ``token`` (or a sidecar
    token) unless ``token`` is ``None``."""
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        # On loopback the SDK also checks Host and Origin against DNS rebinding.
        host=host if is_loopback(host) else "0.0.0.0",
    )
    return BearerTokens(app, bridge, token=token)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0 picks a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP by name: asyncio sets TCP_NODELAY on accepted sockets only when the socket
    # says it is TCP; without it every answer to a keep-alive client waits on Nagle (~40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted sockets
    try:
        sock.bind((host, port))
        # Listening before uvicorn starts: a client that connects at once waits in the backlog.
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock
