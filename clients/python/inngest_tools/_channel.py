"""The channel to the daemon, from the environment alone: TLS or not, keepalive, reconnection.

TLS when ``TOOLBRIDGE_ADDRESS`` is ``tls://HOST:PORT`` or ``TOOLBRIDGE_TLS_CA`` names a CA to
trust (then never clear text); ``TOOLBRIDGE_TLS_CERT`` / ``TOOLBRIDGE_TLS_KEY`` for mutual
TLS. The channel pings a connection that carries calls, so that one the network cut is found
in seconds, and reconnects soon after the network heals (see :mod:`._transport` for what
happens to the calls).
"""

from __future__ import annotations

import os

import grpc
from grpc import aio

from inngest_tools._errors import ToolError

TRANSPORT_MESSAGE_LIMIT = 64 * 1024 * 1024 + 64 * 1024
TLS_CA_VARIABLE = "TOOLBRIDGE_TLS_CA"
TLS_CERT_VARIABLE = "TOOLBRIDGE_TLS_CERT"
TLS_KEY_VARIABLE = "TOOLBRIDGE_TLS_KEY"
RECONNECT_VARIABLE = "TOOLBRIDGE_RECONNECT_WINDOW"
RECONNECT_WINDOW = 60.0
"""Seconds a call whose connection was lost is tried again for, on new connections, before it
fails with a retryable ``Unavailable`` (``TOOLBRIDGE_RECONNECT_WINDOW`` overrides it)."""
KEEPALIVE_TIME = 10.0
"""Seconds of quiet on a connection with calls in flight before the client pings the daemon:
a connection cut by the network is found within this and ``KEEPALIVE_TIMEOUT``, not after
the minutes TCP takes to give up."""
KEEPALIVE_TIMEOUT = 5.0


def _env_path(name: str) -> bytes | None:
    path = os.environ.get(name, "")
    if not path:
        return None
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        raise ToolError(
            f"{name}={path} cannot be read: {exc.strerror or exc}", type="NotConfigured"
        ) from None


def open_channel(address: str) -> tuple[aio.Channel, bool]:
    """The channel to ``address`` (as ``TOOLBRIDGE_ADDRESS`` gives it), and whether it is TLS.

    TLS when the address is ``tls://HOST:PORT`` or ``TOOLBRIDGE_TLS_CA`` names a CA to trust
    (then never clear text, whatever the address says); the system's CAs without one.
    ``TOOLBRIDGE_TLS_CERT`` and ``TOOLBRIDGE_TLS_KEY`` give a client certificate (mutual TLS).
    """
    target = address.removeprefix("tls://")
    options = [
        ("grpc.max_receive_message_length", TRANSPORT_MESSAGE_LIMIT),
        ("grpc.max_send_message_length", TRANSPORT_MESSAGE_LIMIT),
        # A network that drops a connection silently is found by pings, only while calls are
        # in flight (the daemon tolerates one each 5 s; see its transport settings).
        ("grpc.keepalive_time_ms", round(KEEPALIVE_TIME * 1000)),
        ("grpc.keepalive_timeout_ms", round(KEEPALIVE_TIMEOUT * 1000)),
        ("grpc.keepalive_permit_without_calls", 0),
        ("grpc.http2.max_pings_without_data", 0),  # a long call sends no data: keep pinging
        # Reconnect soon after a partition heals, not after a backoff grown to minutes.
        ("grpc.initial_reconnect_backoff_ms", 500),
        ("grpc.max_reconnect_backoff_ms", 3000),
    ]
    ca = _env_path(TLS_CA_VARIABLE)
    cert, key = _env_path(TLS_CERT_VARIABLE), _env_path(TLS_KEY_VARIABLE)
    if (cert is None) != (key is None):
        raise ToolError(
            f"mutual TLS needs both {TLS_CERT_VARIABLE} and {TLS_KEY_VARIABLE}", type="NotConfigured"
        )
    if target is address and ca is None:
        if cert is not None:
            raise ToolError(
                f"{TLS_CERT_VARIABLE} is set but TOOLBRIDGE_ADDRESS={address} is not tls:// and "
                f"{TLS_CA_VARIABLE} is not set: refusing to send the token in clear text",
                type="NotConfigured",
            )
        return aio.insecure_channel(address, options=options), False
    credentials = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
    return aio.secure_channel(target, credentials, options=options), True


def reconnect_window() -> float:
    text = os.environ.get(RECONNECT_VARIABLE, "")
    try:
        return max(0.0, float(text)) if text else RECONNECT_WINDOW
    except ValueError:
        return RECONNECT_WINDOW
