"""The web view's and MCP HTTP's listening sockets say they are TCP and set TCP_NODELAY:
asyncio sets TCP_NODELAY on an accepted socket only when the socket's protocol is
IPPROTO_TCP, and without it a keep-alive client waits on Nagle's algorithm for each answer."""

from __future__ import annotations

import socket

from toolbridge._mcp.http import bind
from toolbridge._ui.server import listen


def test_the_listeners_are_tcp_with_nodelay() -> None:
    for sock in (listen(0), bind("127.0.0.1", 0)):
        with sock:
            assert sock.proto == socket.IPPROTO_TCP
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
            # What an accepted connection inherits: the server side of a real connection.
            with socket.create_connection(sock.getsockname()[:2]) as client:
                accepted, _ = sock.accept()
                with accepted:
                    assert accepted.proto == socket.IPPROTO_TCP
                    assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
                    client.sendall(b"x")
                    assert accepted.recv(1) == b"x"
