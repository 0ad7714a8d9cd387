"""TLS for the daemon's TCP faces: credentials from PEM files, checked before serving.

Tokens travel in a call's metadata, so a TCP face without TLS shows them to anyone on the
path. Every TCP face (the gRPC server, ``mcp --http``, ``ui``) takes the same three files: a
certificate chain and its key, and optionally a CA whose certificates clients must present
(mutual TLS). They are read and checked when the face starts, so that a wrong file is one
clear line then, not a failed handshake later on every client: unreadable or not PEM, a key
that does not match the certificate, a certificate expired or not yet valid.

Clear text is refused off loopback (:func:`check_clear_text`) unless asked for by name
(``insecure=True``, ``--insecure``), and then it warns.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from toolbridge._errors import ToolbridgeError

__all__ = ["ClearTextWarning", "TLSConfig", "TLSError", "check_clear_text", "is_loopback"]

PathLike = str | os.PathLike[str]


class TLSError(ToolbridgeError, ValueError):
    """A TLS setting cannot be used: a file unreadable or wrong, or clear text off loopback."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) stays on this machine."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def listen_host(listen: str) -> str:
    """The host part of ``HOST:PORT``."""
    return listen.rsplit(":", 1)[0].strip("[]")


def check_clear_text(listen: str, *, insecure: bool, face: str = "the bridge") -> str | None:
    """Refuse clear text on a non-loopback ``listen`` address unless ``insecure``.

    Returns:
        The warning to give when ``insecure`` allowed it, else ``None``.

    Raises:
        TLSError: naming the options that fix it.
    """
    if is_loopback(listen_host(listen)):
        return None
    if not insecure:
        raise TLSError(
            f"{face} would serve {listen} without TLS: tokens would cross the network in clear "
            "text; give a certificate and key (tls_cert=/tls_key=, --tls-cert/--tls-key), or "
            "insecure=True (--insecure) on a network you trust"
        )
    return f"{face} serves {listen} without TLS (insecure): tokens cross the network in clear text"


class ClearTextWarning(UserWarning):
    """A face serves clear text off loopback because ``insecure`` asked for it."""


@dataclass(frozen=True)
class TLSConfig:
    """The PEM files one TCP face serves TLS with.

    Args:
        cert: The server's certificate chain (its own certificate first).
        key: The certificate's private key (unencrypted).
        client_ca: CA certificates a client's certificate must chain to; when given, a
            client without a valid certificate is refused (mutual TLS).
    """

    cert: Path
    key: Path
    client_ca: Path | None = None

    @classmethod
    def from_options(
        cls, cert: PathLike | None, key: PathLike | None, client_ca: PathLike | None
    ) -> TLSConfig | None:
        """The configuration ``tls_cert``/``tls_key``/``tls_client_ca`` describe, or ``None``.

        Raises:
            TLSError: for a key without a certificate (or the other way round), or a
                client CA without either.
        """
        if cert is None and key is None:
            if client_ca is not None:
                raise TLSError(
                    "a client CA (tls_client_ca=, --tls-client-ca) needs a certificate and key too: "
                    "mutual TLS is TLS first"
                )
            return None
        if cert is None or key is None:
            raise TLSError(
                "TLS needs both a certificate and its key (tls_cert=/tls_key=, --tls-cert/--tls-key)"
            )
        return cls(Path(cert), Path(key), None if client_ca is None else Path(client_ca))

    def load(self) -> tuple[bytes, bytes, bytes | None]:
        """The certificate chain, key and client CA, read and checked.

        Raises:
            TLSError: one line naming the file and what is wrong with it.
        """
        cert = _read_pem(self.cert, "certificate", b"CERTIFICATE")
        key = _read_pem(self.key, "key", b"PRIVATE KEY")
        client_ca = None if self.client_ca is None else _read_pem(self.client_ca, "client CA", b"CERTIFICATE")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(self.cert, self.key)
        except ssl.SSLError as exc:
            reason = "does not match the certificate" if "KEY_VALUES_MISMATCH" in str(exc) else str(exc)
            raise TLSError(f"TLS key {self.key}: {reason} {self.cert}") from None
        _check_validity(self.cert, cert, "certificate")
        if self.client_ca is not None and client_ca is not None:
            try:
                context.load_verify_locations(cadata=client_ca.decode("ascii", "replace"))
            except ssl.SSLError as exc:
                raise TLSError(f"TLS client CA {self.client_ca}: not a usable certificate ({exc})") from None
        return cert, key, client_ca

    def uvicorn_options(self) -> dict[str, object]:
        """The same files as ``uvicorn.Config`` options (checked first, see :meth:`load`)."""
        self.load()
        options: dict[str, object] = {"ssl_certfile": str(self.cert), "ssl_keyfile": str(self.key)}
        if self.client_ca is not None:
            options["ssl_ca_certs"] = str(self.client_ca)
            options["ssl_cert_reqs"] = ssl.CERT_REQUIRED
        return options


def _read_pem(path: Path, what: str, label: bytes) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TLSError(f"TLS {what} {path}: cannot be read ({exc.strerror or exc})") from None
    if b"-----BEGIN " not in data or label not in data:
        kind = "a private key" if label == b"PRIVATE KEY" else "a certificate"
        raise TLSError(f"TLS {what} {path}: not {kind} in PEM form (-----BEGIN ...-----)")
    return data


def _check_validity(path: Path, pem: bytes, what: str) -> None:
    """Refuse the first certificate of ``pem`` when it expired or is not valid yet."""
    begin = pem.index(b"-----BEGIN CERTIFICATE-----")
    end = pem.index(b"-----END CERTIFICATE-----", begin) + len(b"-----END CERTIFICATE-----")
    # The standard library decodes a certificate's dates only from a file; a private copy
    # holds just the first certificate (a chain file lists the server's own first).
    with tempfile.NamedTemporaryFile("wb", suffix=".pem") as first:
        first.write(pem[begin:end] + b"\n")
        first.flush()
        try:
            decoded = ssl._ssl._test_decode_cert(first.name)  # type: ignore[attr-defined]
        except (ssl.SSLError, OSError) as exc:
            raise TLSError(f"TLS {what} {path}: cannot be decoded ({exc})") from None
    now = datetime.datetime.now(datetime.UTC)
    not_before = _when(decoded["notBefore"])
    not_after = _when(decoded["notAfter"])
    if now >= not_after:
        raise TLSError(f"TLS {what} {path}: expired on {not_after:%Y-%m-%d %H:%M} UTC; issue a new one")
    if now < not_before:
        raise TLSError(f"TLS {what} {path}: not valid before {not_before:%Y-%m-%d %H:%M} UTC")


def _when(text: str) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ssl.cert_time_to_seconds(text), tz=datetime.UTC)
