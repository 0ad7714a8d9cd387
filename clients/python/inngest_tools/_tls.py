"""One clear line for a TLS connection that failed, instead of gRPC's connection report.

gRPC says why a handshake failed in a long ``UNAVAILABLE`` message (this client's side of
it: the daemon's certificate expired, names another host, or comes from a CA not trusted).
When the daemon refuses this client (mutual TLS: no certificate, or one it does not trust)
gRPC only says the socket closed; then one handshake made with Python's ``ssl`` reads the
daemon's alert, which names the reason. Both become a ``ToolError`` of type ``TLSError``,
not retryable: calling again cannot fix a certificate.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl

from inngest_tools._errors import ToolError

__all__ = ["diagnose", "tls_failure"]

PROBE_TIMEOUT = 5.0

_CA = "TOOLBRIDGE_TLS_CA"
_CERT = "TOOLBRIDGE_TLS_CERT"
_KEY = "TOOLBRIDGE_TLS_KEY"

# What gRPC's (BoringSSL's) and Python's (OpenSSL's) reports say -> what it means.
_REASONS = (
    ("certificate has expired", "the daemon's certificate has expired"),
    ("certificate is not yet valid", "the daemon's certificate is not valid yet"),
    ("hostname verification", "the daemon's certificate is not for {host}"),
    ("hostname mismatch", "the daemon's certificate is not for {host}"),
    ("ip address mismatch", "the daemon's certificate is not for {host}"),
    (
        "unable to get local issuer",
        "the daemon's certificate is not signed by a CA this client trusts ({trust})",
    ),
    (
        "self-signed certificate",
        "the daemon's certificate is not signed by a CA this client trusts ({trust})",
    ),
    (
        "self signed certificate",
        "the daemon's certificate is not signed by a CA this client trusts ({trust})",
    ),
    ("certificate_required", "the daemon requires a client certificate: set {cert} and {key}"),
    ("peer_did_not_return_a_certificate", "the daemon requires a client certificate: set {cert} and {key}"),
    ("alert_unknown_ca", "the daemon does not trust this client's certificate ({cert})"),
    ("alert_bad_certificate", "the daemon does not trust this client's certificate ({cert})"),
    ("alert_certificate_expired", "the daemon refused this client's certificate: it has expired ({cert})"),
    # The daemon's TLS (BoringSSL, TLS 1.3) closes a connection whose client certificate it
    # refuses right after the handshake, with no alert: said only by the probe below.
    (
        "closed after the handshake with a certificate",
        "the daemon does not trust this client's certificate ({cert}): not from its CA, or expired",
    ),
    ("closed after the handshake", "the daemon requires a client certificate: set {cert} and {key}"),
    ("wrong_version_number", "the daemon does not speak TLS at this address"),
    ("packet_length_too_long", "the daemon does not speak TLS at this address"),
    ("record_too_large", "the daemon does not speak TLS at this address"),
)


def _target(address: str) -> tuple[str, int] | None:
    host, sep, port = address.removeprefix("tls://").rpartition(":")
    if not sep or not port.isdigit() or host.startswith("unix"):
        return None
    return host.strip("[]"), int(port)


def tls_failure(message: str, address: str) -> ToolError | None:
    """The one-line TLS error ``message`` (gRPC's or ``ssl``'s) reports, if it reports one."""
    lowered = message.lower()
    target = _target(address)
    host = target[0] if target else address
    trust = f"{_CA}={os.environ[_CA]}" if os.environ.get(_CA) else "the system's CAs"
    cert = f"{_CERT}={os.environ[_CERT]}" if os.environ.get(_CERT) else _CERT
    for needle, reason in _REASONS:
        if needle in lowered:
            text = reason.format(host=host, trust=trust, cert=cert, key=_KEY)
            return ToolError(f"TLS to {address.removeprefix('tls://')} failed: {text}", type="TLSError")
    return None


def _handshake(host: str, port: int) -> str:
    """Connect once with ``ssl`` as the channel would, and return what went wrong ("" if nothing)."""
    context = ssl.create_default_context(cafile=os.environ.get(_CA) or None)
    context.set_alpn_protocols(["h2"])
    with_cert = bool(os.environ.get(_CERT) and os.environ.get(_KEY))
    if with_cert:
        context.load_cert_chain(os.environ[_CERT], os.environ[_KEY])
    try:
        with (
            socket.create_connection((host, port), timeout=PROBE_TIMEOUT) as raw,
            context.wrap_socket(raw, server_hostname=host) as tls,
        ):
            # TLS 1.3: the daemon checks the client's certificate after the handshake; a
            # daemon that accepts it answers HTTP/2's preface with its settings.
            tls.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            if tls.recv(1):
                return ""
    except ssl.SSLError as exc:
        return f"{exc.reason or ''} {exc}"
    except (OSError, ValueError):
        return ""
    return "closed after the handshake" + (" with a certificate" if with_cert else "")


async def diagnose(address: str, message: str) -> ToolError | None:
    """Why a TLS connection to ``address`` failed, in one line, if TLS is why."""
    found = tls_failure(message, address)
    target = _target(address)
    if found is not None or target is None:
        return found
    report = await asyncio.to_thread(_handshake, *target)
    return tls_failure(report, address) if report else None
