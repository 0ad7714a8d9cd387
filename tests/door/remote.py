"""Local HTTPS servers with a test CA of their own: the outside world for egress tests.

Each server answers every request with JSON saying what it saw: the method, the path, and
whether the ``Authorization`` (bearer or basic) carried the expected credential; never the
credential itself. It keeps every request it got, headers included, for the test to check.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import ipaddress
import json
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import h11
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Remote:
    port: int
    seen: list[Seen] = field(default_factory=list)
    hanging: asyncio.Event = field(default_factory=asyncio.Event)
    server: asyncio.Server | None = None


class WorldCA:
    """A CA for the test servers, written to ``ca.pem`` for ``Egress(upstream_ca=...)``."""

    def __init__(self, directory: Path) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "toolbridge test CA")])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.path = directory / "test-ca.pem"
        self.path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        self._directory = directory

    def server_context(self) -> ssl.SSLContext:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        sans: list[x509.GeneralName] = [
            x509.DNSName("localhost"),
            x509.DNSName(socket.gethostname()),  # this machine's name: mostly a loopback address
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ]
        leaf = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        chain = self._directory / "server.pem"
        chain.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
            + leaf.public_bytes(serialization.Encoding.PEM)
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(chain)
        return context


async def _next(conn: h11.Connection, reader: asyncio.StreamReader) -> object:
    while (event := conn.next_event()) is h11.NEED_DATA:
        conn.receive_data(await reader.read(65536))
    return event


async def _serve(
    remote: Remote, credential: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    conn = h11.Connection(h11.SERVER)
    try:
        while True:
            request = await _next(conn, reader)
            if not isinstance(request, h11.Request):
                return
            body = bytearray()
            while not isinstance(event := await _next(conn, reader), h11.EndOfMessage):
                if isinstance(event, h11.Data):
                    body += event.data
            headers = {k.decode(): v.decode() for k, v in request.headers}
            seen = Seen(request.method.decode(), request.target.decode(), headers, bytes(body))
            remote.seen.append(seen)
            if seen.path == "/hang":  # never answers: a request in flight for as long as needed
                remote.hanging.set()
                await asyncio.Event().wait()
            auth = headers.get("authorization", "")
            basic = ""
            if auth.lower().startswith("basic "):
                basic = base64.b64decode(auth[6:]).decode(errors="replace")
            answer = json.dumps(
                {
                    "method": seen.method,
                    "path": seen.path,
                    "bearer_ok": auth == f"Bearer {credential}",
                    "basic_ok": basic.endswith(f":{credential}"),
                    "custom_ok": headers.get("x-api-key") == credential,
                    "body_bytes": len(body),
                }
            ).encode()
            response = h11.Response(
                status_code=200,
                headers=[
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(answer)).encode()),
                ],
            )
            writer.write(
                conn.send(response) + conn.send(h11.Data(data=answer)) + conn.send(h11.EndOfMessage())
            )
            await writer.drain()
            if conn.our_state is h11.MUST_CLOSE:
                return
            conn.start_next_cycle()
    except (ConnectionError, h11.ProtocolError, ssl.SSLError):
        return
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def remotes(
    ca: WorldCA, credential: str, count: int, *, tls: bool = True
) -> AsyncIterator[list[Remote]]:
    """``count`` HTTPS servers (plain HTTP with ``tls=False``) on the host's loopback."""
    context = ca.server_context() if tls else None
    started: list[Remote] = []
    try:
        for _ in range(count):
            remote = Remote(port=0)

            async def handle(
                reader: asyncio.StreamReader, writer: asyncio.StreamWriter, remote: Remote = remote
            ) -> None:
                await _serve(remote, credential, reader, writer)

            remote.server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
            remote.port = remote.server.sockets[0].getsockname()[1]
            started.append(remote)
        yield started
    finally:
        for remote in started:
            assert remote.server is not None
            remote.server.close()
