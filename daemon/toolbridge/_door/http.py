"""HTTP/1.1 for the egress door, parsed by h11 on both sides: nothing here parses HTTP by hand.

The proxy's plumbing, knowing nothing of policy, secrets or the journal: reading the next
event of a connection, TLS on a connection the door accepted, a plain-text answer, the headers
a request goes upstream with, and one exchange with an upstream server, its answer streamed
back to the sandbox.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import h11

__all__ = [
    "ENDED",
    "PLAIN_PORT",
    "Target",
    "Upstream",
    "answer",
    "next_event",
    "outgoing_headers",
    "relay",
    "serve_tls",
    "split_authority",
]

READ = 65536
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"host",
        b"content-length",
        b"expect",  # answered here (100 Continue); the body goes upstream whole
    }
)
PLAIN_PORT = 80
"""A ``CONNECT`` to this port carries plain HTTP; to any other, TLS."""

ENDED = (h11.ProtocolError, ConnectionError, TimeoutError, asyncio.IncompleteReadError, ssl.SSLError)
"""How a connection with the sandbox or upstream ends early."""


@dataclass
class Target:
    scheme: str
    host: str
    port: int

    @property
    def authority(self) -> str:
        default = 443 if self.scheme == "https" else 80
        return self.host if self.port == default else f"{self.host}:{self.port}"


@dataclass
class Upstream:
    """One connection upstream, kept for the next request of the same tunnel."""

    target: Target
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    conn: h11.Connection = field(default_factory=lambda: h11.Connection(h11.CLIENT))

    def close(self) -> None:
        self.writer.close()


async def next_event(conn: h11.Connection, reader: asyncio.StreamReader, timeout: float | None = None) -> Any:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        if timeout is None:
            data = await reader.read(READ)
        else:
            async with asyncio.timeout(timeout):
                data = await reader.read(READ)
        conn.receive_data(data)


class _TLSProtocol(asyncio.StreamReaderProtocol):
    def eof_received(self) -> bool:
        super().eof_received()
        return False  # over TLS a half-close means nothing: the stream ends


async def serve_tls(
    writer: asyncio.StreamWriter, context: ssl.SSLContext
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The server side of TLS on an accepted connection, as new streams.

    Not ``StreamWriter.start_tls``: on Python 3.11 a server-side upgrade calls the server's
    connection callback a second time, with the decrypted streams, and the first handler
    sees an end of file.
    """
    loop = asyncio.get_running_loop()
    await writer.drain()
    reader = asyncio.StreamReader(limit=READ)
    protocol = _TLSProtocol(reader)
    transport = await loop.start_tls(writer.transport, protocol, context, server_side=True)
    if transport is None:
        raise ConnectionResetError("the sandbox closed the connection during the TLS handshake")
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


def split_authority(authority: str) -> tuple[str, int] | None:
    host, sep, port = authority.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    host = host.strip("[]").lower()
    return host, int(port)


async def answer(conn: h11.Connection, writer: asyncio.StreamWriter, status: int, message: str) -> None:
    """Answer the sandbox with ``status`` and ``message`` as plain text, and close."""
    body = (message + "\n").encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    writer.write(conn.send(h11.Response(status_code=status, headers=headers)))
    writer.write(conn.send(h11.Data(data=body)))
    writer.write(conn.send(h11.EndOfMessage()))
    await writer.drain()


def outgoing_headers(
    headers: Sequence[tuple[bytes, bytes]], target: Target, length: int, method: str
) -> list[tuple[bytes, bytes]]:
    """A request's headers as they go upstream: its own host, no hop-by-hop ones, its length."""
    out: list[tuple[bytes, bytes]] = [(b"host", target.authority.encode())]
    out += [(name, value) for name, value in headers if name not in HOP_BY_HOP]
    if length or method not in ("GET", "HEAD", "DELETE", "OPTIONS"):
        out.append((b"content-length", str(length).encode()))
    return out


async def relay(
    conn: h11.Connection,
    writer: asyncio.StreamWriter,
    upstream: Upstream,
    request: h11.Request,
    body: bytes,
    timeout: float,
) -> tuple[Upstream | None, int, int]:
    """Send ``request`` upstream and stream its answer back to the sandbox.

    Returns:
        The upstream connection if it may carry the next request (else it is closed), the
        answer's status and the bytes of its body.
    """
    up = upstream.conn
    data = up.send(request)
    if body:
        data += up.send(h11.Data(data=body))
    data += up.send(h11.EndOfMessage())
    upstream.writer.write(data)
    await upstream.writer.drain()
    response = await next_event(up, upstream.reader, timeout)
    while isinstance(response, h11.InformationalResponse):
        response = await next_event(up, upstream.reader, timeout)
    if not isinstance(response, h11.Response):
        raise h11.RemoteProtocolError("no response upstream")
    kept = [(n, v) for n, v in response.headers if n not in HOP_BY_HOP or n == b"content-length"]
    writer.write(
        conn.send(h11.Response(status_code=response.status_code, headers=kept, reason=response.reason))
    )
    sent = 0
    while True:
        event = await next_event(up, upstream.reader, timeout)
        if isinstance(event, h11.Data):
            sent += len(event.data)
            writer.write(conn.send(h11.Data(data=event.data)))
            await writer.drain()
        elif isinstance(event, h11.EndOfMessage):
            writer.write(conn.send(h11.EndOfMessage()))
            await writer.drain()
            break
        else:
            raise h11.RemoteProtocolError("the answer upstream ended early")
    if up.our_state is h11.DONE and up.their_state is h11.DONE:
        up.start_next_cycle()
        return upstream, response.status_code, sent
    upstream.close()  # the server closes after this answer: the next request connects anew
    return None, response.status_code, sent
