"""The Node client over TLS and mutual TLS, from its environment alone, against a real grpc.aio
server (``grpc.ssl_server_credentials``) with certificates made by ``openssl`` in the test.

The contract (shared with the Python client): TLS when ``TOOLBRIDGE_ADDRESS`` is ``tls://HOST:PORT``
or ``TOOLBRIDGE_TLS_CA`` is set; a client with a CA never speaks clear text; ``tls://`` without a
CA trusts Node's default CAs; each certificate problem is one clear line.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.helpers import WAIT
from tests.tls_certs import CertPair, make_ca, make_cert
from toolbridge._server._proto import toolbridge_pb2 as pb
from toolbridge._server._proto import toolbridge_pb2_grpc as pb_grpc

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "node" / "index.js"
TOKEN = "tb1.tls-test"
CALL = f"""
const {{ tools }} = require({json.dumps(str(CLIENT))});
tools.echo("over tls").then(
  (value) => console.log(JSON.stringify({{ value }})),
  ({{ type, message, retryable }}) => console.log(JSON.stringify({{ type, message, retryable }})),
);
"""


class Echo(pb_grpc.ToolBridgeServiceServicer):  # type: ignore[misc]
    """Answers every call with its own positional arguments; counts the calls it read."""

    def __init__(self) -> None:
        self.calls = 0

    async def CallToolStream(
        self, requests: AsyncIterator[pb.CallToolStreamRequest], context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.CallToolStreamResponse]:
        assert ("x-toolbridge-token", TOKEN) in tuple(context.invocation_metadata() or ())
        async for request in requests:
            for call in [request, *request.more]:
                self.calls += 1
                answer = pb.CallToolResponse(result_json=call.call.positional_arguments_json)
                yield pb.CallToolStreamResponse(call_id=call.call_id, response=answer)


@dataclass(frozen=True)
class Pki:
    ca: CertPair
    server: CertPair
    client: CertPair
    other_ca: CertPair
    stranger: CertPair  # a client certificate from the other CA
    elsewhere: CertPair  # a server certificate from the other CA
    expired: CertPair
    other_host: CertPair


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca = make_ca(directory)
    other = make_ca(directory, "another CA")
    return Pki(
        ca=ca,
        server=make_cert(directory, ca, "server"),
        client=make_cert(directory, ca, "client", hosts=(), client=True),
        other_ca=other,
        stranger=make_cert(directory, other, "stranger", hosts=(), client=True),
        elsewhere=make_cert(directory, other, "elsewhere"),
        expired=make_cert(directory, ca, "expired", days=-1),
        other_host=make_cert(directory, ca, "other-host", hosts=("daemon.example",)),
    )


class Server:
    """A grpc.aio server on a loopback port: TLS with ``cert`` (client certificates from
    ``client_ca`` required when given), or clear text without ``cert``."""

    def __init__(self, cert: CertPair | None, client_ca: Path | None = None) -> None:
        self.echo = Echo()
        self.server = grpc.aio.server()
        pb_grpc.add_ToolBridgeServiceServicer_to_server(self.echo, self.server)
        if cert is None:
            self.port = self.server.add_insecure_port("127.0.0.1:0")
        else:
            credentials = grpc.ssl_server_credentials(
                [(cert.key.read_bytes(), cert.cert.read_bytes())],
                root_certificates=None if client_ca is None else client_ca.read_bytes(),
                require_client_auth=client_ca is not None,
            )
            self.port = self.server.add_secure_port("127.0.0.1:0", credentials)


@pytest.fixture
async def serve() -> AsyncIterator[Any]:
    started: list[Server] = []

    async def start(cert: CertPair | None, client_ca: Path | None = None) -> Server:
        server = Server(cert, client_ca)
        await server.server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        await server.server.stop(None)


async def call(tmp_path: Path, address: str, **tls: Path) -> dict[str, Any]:
    """One tool call from a fresh Node process with only these variables; its outcome."""
    script = tmp_path / "call.js"
    script.write_text(CALL)
    env = {"PATH": os.environ["PATH"], "TOOLBRIDGE_ADDRESS": address, "TOOLBRIDGE_TOKEN": TOKEN}
    env |= {f"TOOLBRIDGE_TLS_{name.upper()}": str(path) for name, path in tls.items()}
    process = await asyncio.create_subprocess_exec(
        "node", script, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 0, stderr.decode()
    outcome: dict[str, Any] = json.loads(stdout)
    if "message" in outcome:
        assert "\n" not in outcome["message"]
    return outcome


async def test_tls_address_with_a_ca(tmp_path: Path, pki: Pki, serve: Any) -> None:
    server = await serve(pki.server)
    assert await call(tmp_path, f"tls://localhost:{server.port}", ca=pki.ca.cert) == {"value": ["over tls"]}
    assert await call(tmp_path, f"tls://127.0.0.1:{server.port}", ca=pki.ca.cert) == {"value": ["over tls"]}


async def test_a_ca_alone_makes_a_plain_address_tls(tmp_path: Path, pki: Pki, serve: Any) -> None:
    server = await serve(pki.server)
    assert await call(tmp_path, f"localhost:{server.port}", ca=pki.ca.cert) == {"value": ["over tls"]}


async def test_a_client_with_a_ca_never_speaks_clear_text(tmp_path: Path, pki: Pki, serve: Any) -> None:
    clear = await serve(None)
    outcome = await call(tmp_path, f"127.0.0.1:{clear.port}", ca=pki.ca.cert)
    assert outcome["type"] == "TLSError"
    assert outcome["retryable"] is False
    assert outcome["message"].endswith("it does not speak TLS there (a clear-text daemon?)"), outcome
    assert clear.echo.calls == 0  # nothing reached the clear-text server as a call


async def test_mutual_tls(tmp_path: Path, pki: Pki, serve: Any) -> None:
    server = await serve(pki.server, client_ca=pki.ca.cert)
    address = f"tls://localhost:{server.port}"
    outcome = await call(tmp_path, address, ca=pki.ca.cert, cert=pki.client.cert, key=pki.client.key)
    assert outcome == {"value": ["over tls"]}
    demanded = await call(tmp_path, address, ca=pki.ca.cert)
    assert demanded["type"] == "TLSError", demanded
    # A gRPC server (BoringSSL) closes without an alert Node can read: what it demands is
    # inferred from a close after the handshake, before any HTTP/2.
    assert demanded["message"] == (
        f"the daemon at {address}: it closed the connection after the TLS handshake, before HTTP/2, "
        "as a daemon that demands a client certificate does: set TOOLBRIDGE_TLS_CERT and TOOLBRIDGE_TLS_KEY"
    )
    refused = await call(tmp_path, address, ca=pki.ca.cert, cert=pki.stranger.cert, key=pki.stranger.key)
    assert refused["type"] == "TLSError", refused
    refusal = ", as a daemon that refuses this client's certificate does"
    refusal += f" (TOOLBRIDGE_TLS_CERT={pki.stranger.cert})"
    assert refused["message"].endswith(refusal)
    assert server.echo.calls == 1


@pytest.mark.parametrize(
    ("served", "expected"),
    [
        ("expired", "it has expired"),
        ("other_host", "is for another host (Host: localhost. is not in the cert's altnames: DNS:daemon"),
        ("elsewhere", "is signed by a CA this client does not trust (TOOLBRIDGE_TLS_CA="),
    ],
)
async def test_certificate_errors_are_one_clear_line(
    tmp_path: Path, pki: Pki, serve: Any, served: str, expected: str
) -> None:
    server = await serve(getattr(pki, served))
    outcome = await call(tmp_path, f"tls://localhost:{server.port}", ca=pki.ca.cert)
    assert outcome["type"] == "TLSError"
    assert outcome["retryable"] is False
    assert outcome["message"].startswith(f"the daemon at tls://localhost:{server.port}: its TLS certificate ")
    assert expected.replace("it has", "has") in outcome["message"]
    assert server.echo.calls == 0


async def test_tls_without_a_ca_trusts_the_default_cas(tmp_path: Path, pki: Pki, serve: Any) -> None:
    server = await serve(pki.server)
    outcome = await call(tmp_path, f"tls://localhost:{server.port}")
    assert outcome["type"] == "TLSError"
    assert outcome["message"].endswith(
        "is signed by a CA this client does not trust (Node's default CAs); "
        "set TOOLBRIDGE_TLS_CA to the CA that signed it"
    )


async def test_settings_that_cannot_work_are_refused_before_connecting(tmp_path: Path, pki: Pki) -> None:
    half = await call(tmp_path, "tls://localhost:1", ca=pki.ca.cert, cert=pki.client.cert)
    assert half == {
        "type": "NotConfigured",
        "message": "TOOLBRIDGE_TLS_CERT is set but TOOLBRIDGE_TLS_KEY is not: a client certificate needs both",  # noqa: E501
        "retryable": False,
    }
    clear = await call(tmp_path, "localhost:1", cert=pki.client.cert, key=pki.client.key)
    assert clear["type"] == "NotConfigured"
    assert "would speak clear text" in clear["message"]
    missing = await call(tmp_path, "tls://localhost:1", ca=tmp_path / "nowhere.pem")
    assert missing["type"] == "NotConfigured"
    assert missing["message"] == f"TOOLBRIDGE_TLS_CA={tmp_path / 'nowhere.pem'}: cannot read it (ENOENT)"


async def test_the_guides_sample_runs_over_mutual_tls(tmp_path: Path, pki: Pki, serve: Any) -> None:
    # docs/guides/node-client-tls.md includes examples/docs/node_tls_agent.js.
    sample = Path(__file__).resolve().parents[2] / "examples" / "docs" / "node_tls_agent.js"
    node_path = tmp_path / "node_path"
    node_path.mkdir()
    (node_path / "inngest_tools").symlink_to(CLIENT.parent)
    server = await serve(pki.server, client_ca=pki.ca.cert)
    expired = await serve(pki.expired)
    env = {"PATH": os.environ["PATH"], "NODE_PATH": str(node_path), "TOOLBRIDGE_TOKEN": TOKEN}
    env |= {"TOOLBRIDGE_TLS_CA": str(pki.ca.cert)}
    env |= {"TOOLBRIDGE_TLS_CERT": str(pki.client.cert), "TOOLBRIDGE_TLS_KEY": str(pki.client.key)}
    outcomes = []
    for port in (server.port, expired.port):
        process = await asyncio.create_subprocess_exec(
            "node",
            sample,
            env=env | {"TOOLBRIDGE_ADDRESS": f"tls://localhost:{port}"},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), WAIT)
        outcomes.append((process.returncode, stdout.decode(), stderr.decode()))
    assert outcomes == [
        (0, '["hello over TLS"]\n', ""),
        (1, "", f"TLSError: the daemon at tls://localhost:{expired.port}: its TLS certificate has expired\n"),
    ]
