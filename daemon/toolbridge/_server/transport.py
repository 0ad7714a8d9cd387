"""The gRPC server's transport settings: how big a message, how many streams, how long idle.

A sandbox is untrusted: it may open connections and never use them, vanish without closing
them (a killed or frozen sandbox leaves them half-open), or open many streams on one. Each
holds a descriptor of the daemon's, and the daemon's descriptors are shared by every command
of every run. So the transport closes a connection that carries no call for
``connection_idle`` seconds, pings a quiet one and closes it when no answer comes, bounds a
connection's age and its concurrent streams, and refuses a client that floods it with pings.
(The servicer bounds each command's open streams, ``ToolOptions.max_streams``; a connection
carries no token, so connections are bounded by time, not per command.)

And it caps the connections open at once (gRPC's ``grpc.max_allowed_incoming_connections``,
counted per server): at the cap, a new connection is accepted and closed at once, so a
sandbox opening thousands of connections cannot take the descriptors the daemon needs for
everything else (journals, sandboxes' pipes, its own files). A connection says nothing of
its command until it carries a call, so each command gets a server of its own on a socket of
its own (:mod:`_server.doors`), capped at its ``ToolOptions.max_connections``; the bridge's
own socket (sidecar clients, the host's tools) is capped at half the daemon's descriptor
limit (``ulimit -n``).
"""

from __future__ import annotations

import resource

import grpc
from grpc import aio

from toolbridge._tls import TLSConfig

__all__ = [
    "DEFAULT_CONNECTION_IDLE",
    "ENVELOPE_BYTES",
    "add_ports",
    "connection_cap",
    "server_options",
]

SESSION_METADATA_KEY = "x-toolbridge-session"
"""Sent by a client opening a call stream: a random id of its connection's life. With a
call's ``call_id`` it names the call across connections: a client whose connection was lost
sends its calls in flight again, on a new stream under the same session and ids, and each
meets the call already made (see ``call_tool``'s ``call_id``)."""
MAX_SESSION_CHARS = 64

ENVELOPE_BYTES = 1024
"""Room for what a request carries besides the call itself (field tags, lengths, call id)."""

SEND_MESSAGE_LIMIT = 64 * 1024 * 1024 + 64 * 1024
"""The cap on what the daemon sends; replies are limited per call (1 MiB by default) well
below it, with a clear error."""

DEFAULT_CONNECTION_IDLE = 300.0
"""Seconds a connection may carry no call before the daemon closes it."""

KEEPALIVE_TIME = 30.0
"""Seconds of quiet on a connection before the daemon pings the sandbox's end."""

KEEPALIVE_TIMEOUT = 10.0
"""Seconds the daemon waits for the ping's answer before it closes the connection."""

MAX_CONNECTION_AGE = 3600.0
"""Seconds after which a connection is told to go away: its next calls go on a new one.

No grace follows: the calls it carries then keep it until they end, however long they take.
A call may wait for a person for ``approval_hold`` (a user's choice, of hours), and a client
cannot move a call in flight to another connection: a grace period cut such calls with
``Unavailable``. Each call is bounded by its own limits (``tool_timeout``, ``approval_hold``,
the command's timeout) and a command's door closes with it, which bounds its connections."""

MAX_CONCURRENT_STREAMS = 256
"""Streams on one connection at once: above a command's ``max_in_flight`` plus its
``max_streams`` at their defaults (64 + 16), so that only a flood waits."""

MIN_PING_INTERVAL = 5.0
"""The shortest interval between a client's pings the daemon tolerates (then it says go away):
below the Python client's keepalive (10 s), which finds a connection the network cut."""

MAX_HANDSHAKE = 20.0
"""The longest, in seconds, that a new connection may take to say it speaks HTTP/2."""


MIN_CONNECTIONS = 64
"""The smallest connection cap, however low the descriptor limit."""


def connection_cap(listeners: int = 1) -> int:
    """Connections each of ``listeners`` addresses may hold open: half the descriptors, shared.

    Read when the server starts: a daemon whose limit is raised later keeps its cap.
    """
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(MIN_CONNECTIONS, soft // 2 // max(1, listeners))


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def server_options(
    *, max_request_bytes: int, connection_idle: float, max_connections: int | None = None
) -> list[tuple[str, int]]:
    """The channel arguments of the daemon's ``grpc.aio`` server (on one address: the
    connection cap is per address, :func:`connection_cap` unless ``max_connections``).

    Raises:
        ValueError: for a request limit below 1 byte or an idle limit that is not positive.
    """
    if not isinstance(max_request_bytes, int) or max_request_bytes < 1:
        raise ValueError("max_request_bytes must be a whole number of at least 1")
    if not connection_idle > 0:
        raise ValueError("connection_idle must be a positive number of seconds")
    return [
        ("grpc.max_receive_message_length", max_request_bytes + ENVELOPE_BYTES),
        ("grpc.max_send_message_length", SEND_MESSAGE_LIMIT),
        ("grpc.so_reuseport", 0),
        ("grpc.max_connection_idle_ms", _ms(connection_idle)),
        ("grpc.max_connection_age_ms", _ms(MAX_CONNECTION_AGE)),
        ("grpc.keepalive_time_ms", _ms(KEEPALIVE_TIME)),
        ("grpc.keepalive_timeout_ms", _ms(KEEPALIVE_TIMEOUT)),
        ("grpc.keepalive_permit_without_calls", 1),  # ping idle connections too: find half-open ones
        ("grpc.http2.max_pings_without_data", 0),  # the daemon's keepalive pings need no data
        ("grpc.http2.min_ping_interval_without_data_ms", _ms(MIN_PING_INTERVAL)),
        ("grpc.http2.max_ping_strikes", 2),
        ("grpc.max_concurrent_streams", MAX_CONCURRENT_STREAMS),
        # A connection that never completes its HTTP/2 handshake is closed sooner still.
        ("grpc.server_handshake_timeout_ms", _ms(min(connection_idle, MAX_HANDSHAKE))),
        ("grpc.max_allowed_incoming_connections", max_connections or connection_cap()),
    ]


def add_ports(server: aio.Server, addresses: list[str], tls: TLSConfig | None) -> list[str]:
    """Listen on ``addresses`` (``unix:PATH`` or ``HOST:PORT``), the TCP ones with ``tls``.

    Returns:
        The bound addresses, with real ports for any ``:0``; a TCP address served with TLS
        as ``tls://HOST:PORT``, as clients take it. A Unix socket is served in clear, inside
        its private directory.

    Raises:
        TLSError: for TLS files that cannot be used (see ``TLSConfig.load``).
        OSError: for a TCP address that cannot be bound.
    """
    credentials = None
    if tls is not None:
        cert, key, client_ca = tls.load()
        credentials = grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
        )
    bound: list[str] = []
    for address in addresses:
        if address.startswith("unix:"):
            server.add_insecure_port(address)
            bound.append(address)
            continue
        if credentials is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, credentials)
        if port == 0:
            raise OSError(f"cannot listen on {address}")
        host = address.rsplit(":", 1)[0]
        bound.append(f"{'tls://' if credentials is not None else ''}{host}:{port}")
    return bound
