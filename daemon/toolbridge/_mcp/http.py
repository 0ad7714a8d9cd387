"""The MCP face over Streamable HTTP: stateless, JSON responses, a bearer token off loopback.

Each POST to ``/mcp`` is answered on its own (no session), with one JSON body, so progress
notifications do not reach HTTP clients (they ride stdio, or SSE, which this face does not
use). On a loopback address a token is optional; anywhere else every request must carry
``Authorization: Bearer <token>``, a sidecar token (``toolbridge token mint``), checked
against the journal on every request, so a revoked or expired one stops working at once.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

from mcp.server.lowlevel import Server
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from toolbridge import Bridge
from toolbridge._mcp.server import GRANT_STATE_KEY

__all__ = ["BearerTokens", "is_loopback", "mcp_http_app", "parse_host_port"]

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


class BearerTokens:
    """ASGI middleware: checks ``Authorization: Bearer`` against the bridge's sidecar tokens.

    The grant of a valid token goes on the request's scope state, where the MCP handlers
    read it (it limits the tools listed and callable, and the run a call may name).

    Args:
        app: The MCP app.
        bridge: The open bridge whose journal holds the tokens.
        required: Refuse requests without a token (off loopback).
    """

    def __init__(self, app: ASGIApp, bridge: Bridge, *, required: bool) -> None:
        self._app = app
        self._bridge = bridge
        self._required = required

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        header = Headers(scope=scope).get("authorization")
        if header is None and not self._required:
            await self._app(scope, receive, send)
            return
        scheme, _, token = (header or "").partition(" ")
        grant = await self._bridge.check_token(token.strip()) if scheme.lower() == "bearer" else None
        if grant is None:
            reason = (
                "this server needs Authorization: Bearer <token> (mint one with `toolbridge token mint`)"
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


def mcp_http_app(server: Server[Any], bridge: Bridge, *, host: str) -> ASGIApp:
    """The ASGI app serving ``server`` at ``/mcp``, with tokens required off loopback."""
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        # On loopback the SDK also checks Host and Origin against DNS rebinding.
        host=host if is_loopback(host) else "0.0.0.0",
    )
    return BearerTokens(app, bridge, required=not is_loopback(host))


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0 picks a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        # Listening before uvicorn starts: a client that connects at once waits in the backlog.
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock
