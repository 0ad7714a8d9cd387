"""TLS on the gRPC face: a sandbox elsewhere calls over TLS and mutual TLS from its
environment alone; clear text off loopback is refused; each certificate problem is one line.

Certificates are made by the real ``openssl`` (tests/tls_certs.py). A server that serves a
broken certificate (expired, for another host, from an unknown CA) cannot be a bridge (it
refuses such a file at start, tested too), so the client's side of those is met against a
plain grpc server given the broken certificate.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc import aio

from tests.hosts.sandbox import run_client
from tests.tls_certs import CA, Issued, new_ca
from toolbridge import Bridge
from toolbridge._tls import ClearTextWarning, TLSError

PAST = (
    datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC),
    datetime.datetime(2020, 1, 2, tzinfo=datetime.UTC),
)


@dataclass(frozen=True)
class PKI:
    ca: CA
    other: CA  # a CA nobody trusts
    server: Issued
    client: Issued


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    root = tmp_path_factory.mktemp("pki")
    ca = new_ca(root / "ca")
    other = new_ca(root / "other", "another CA")
    return PKI(ca, other, ca.issue("server"), ca.issue("client", client=True, hosts=()))


class Ledger:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def lookup(self, sku: str) -> dict[str, Any]:
        self.calls.append(sku)
        return {"sku": sku}


@dataclass
class Served:
    bridge: Bridge
    ledger: Ledger
    token: str


async def _serve(tmp_path: Path, **tls: Any) -> AsyncIterator[Served]:
    ledger = Ledger()
    bridge = Bridge(journal=tmp_path / "j.db", listen="127.0.0.1:0", tools={"lookup": ledger.lookup}, **tls)
    async with bridge:
        minted = await bridge.mint_token(run_id="remote", tools=["lookup"], max_calls=50, ttl=600)
        assert minted.token is not None
        yield Served(bridge, ledger, minted.token)


@pytest.fixture
async def tls_bridge(tmp_path: Path, pki: PKI) -> AsyncIterator[Served]:
    async for served in _serve(tmp_path, tls_cert=pki.server.cert, tls_key=pki.server.key):
        yield served


@pytest.fixture
async def mtls_bridge(tmp_path: Path, pki: PKI) -> AsyncIterator[Served]:
    async for served in _serve(
        tmp_path, tls_cert=pki.server.cert, tls_key=pki.server.key, tls_client_ca=pki.ca.cert
    ):
        yield served


def env(address: str, token: str, **extra: Path | str) -> dict[str, str]:
    return {"TOOLBRIDGE_ADDRESS": address, "TOOLBRIDGE_TOKEN": token, **{k: str(v) for k, v in extra.items()}}


async def test_a_sandbox_calls_over_tls_with_the_address_serve_prints(
    tls_bridge: Served, pki: PKI, tmp_path: Path
) -> None:
    assert tls_bridge.bridge.address.startswith("tls://127.0.0.1:")
    answers = await run_client(
        tmp_path,
        [("lookup", ["a"])],
        env(tls_bridge.bridge.address, tls_bridge.token, TOOLBRIDGE_TLS_CA=pki.ca.cert),
    )
    assert answers == [{"result": {"sku": "a"}}]
    assert tls_bridge.ledger.calls == ["a"]


async def test_a_ca_alone_makes_a_plain_address_tls(tls_bridge: Served, pki: PKI, tmp_path: Path) -> None:
    plain = tls_bridge.bridge.address.removeprefix("tls://")
    answers = await run_client(
        tmp_path, [("lookup", ["b"])], env(plain, tls_bridge.token, TOOLBRIDGE_TLS_CA=pki.ca.cert)
    )
    assert answers == [{"result": {"sku": "b"}}]


async def test_mutual_tls_serves_a_client_with_a_certificate_from_the_ca(
    mtls_bridge: Served, pki: PKI, tmp_path: Path
) -> None:
    answers = await run_client(
        tmp_path,
        [("lookup", ["c"])],
        env(
            mtls_bridge.bridge.address,
            mtls_bridge.token,
            TOOLBRIDGE_TLS_CA=pki.ca.cert,
            TOOLBRIDGE_TLS_CERT=pki.client.cert,
            TOOLBRIDGE_TLS_KEY=pki.client.key,
        ),
    )
    assert answers == [{"result": {"sku": "c"}}]


async def test_mutual_tls_refuses_a_client_without_a_certificate(
    mtls_bridge: Served, pki: PKI, tmp_path: Path
) -> None:
    [answer] = await run_client(
        tmp_path,
        [("lookup", ["d"])],
        env(mtls_bridge.bridge.address, mtls_bridge.token, TOOLBRIDGE_TLS_CA=pki.ca.cert),
    )
    assert answer["error"] == "TLSError", answer
    assert "requires a client certificate" in answer["message"]
    assert "\n" not in answer["message"]
    assert mtls_bridge.ledger.calls == []


async def test_mutual_tls_refuses_a_client_certificate_from_another_ca(
    mtls_bridge: Served, pki: PKI, tmp_path: Path
) -> None:
    stranger = pki.other.issue("stranger", client=True, hosts=())
    [answer] = await run_client(
        tmp_path,
        [("lookup", ["e"])],
        env(
            mtls_bridge.bridge.address,
            mtls_bridge.token,
            TOOLBRIDGE_TLS_CA=pki.ca.cert,
            TOOLBRIDGE_TLS_CERT=stranger.cert,
            TOOLBRIDGE_TLS_KEY=stranger.key,
        ),
    )
    assert answer["error"] == "TLSError"
    assert "does not trust this client's certificate" in answer["message"]
    assert mtls_bridge.ledger.calls == []


async def test_a_client_with_a_ca_never_falls_back_to_clear_text(pki: PKI, tmp_path: Path) -> None:
    """Attack: a clear-text daemon (or one in the middle) at the address. The client with a CA
    set must not send its token without TLS: the call never reaches the tool."""
    ledger = Ledger()
    async with Bridge(
        journal=tmp_path / "j.db", listen="127.0.0.1:0", tools={"lookup": ledger.lookup}
    ) as bridge:
        minted = await bridge.mint_token(run_id="remote", tools=["lookup"], max_calls=5, ttl=600)
        assert minted.token is not None
        [answer] = await run_client(
            tmp_path, [("lookup", ["f"])], env(bridge.address, minted.token, TOOLBRIDGE_TLS_CA=pki.ca.cert)
        )
    assert answer["error"] == "TLSError"
    assert "does not speak TLS" in answer["message"]
    assert ledger.calls == []


@pytest.fixture
async def plain_grpc_server() -> AsyncIterator[Any]:
    """Serves a certificate a bridge would refuse, to meet the client's side of it."""
    servers: list[aio.Server] = []

    async def start(issued: Issued) -> str:
        server = aio.server()
        credentials = grpc.ssl_server_credentials([(issued.key.read_bytes(), issued.cert.read_bytes())])
        port = server.add_secure_port("127.0.0.1:0", credentials)
        await server.start()
        servers.append(server)
        return f"tls://127.0.0.1:{port}"

    yield start
    for server in servers:
        await server.stop(0)


@pytest.mark.parametrize(
    ("problem", "expected"),
    [
        ("expired", "the daemon's certificate has expired"),
        ("other-host", "the daemon's certificate is not for 127.0.0.1"),
        ("unknown-ca", "not signed by a CA this client trusts"),
    ],
)
async def test_the_client_names_a_bad_server_certificate_in_one_line(
    problem: str, expected: str, pki: PKI, plain_grpc_server: Any, tmp_path: Path
) -> None:
    issued = {
        "expired": lambda: pki.ca.issue("old", not_before=PAST[0], not_after=PAST[1]),
        "other-host": lambda: pki.ca.issue("elsewhere", hosts=("example.org",)),
        "unknown-ca": lambda: pki.other.issue("foreign"),
    }[problem]()
    address = await plain_grpc_server(issued)
    [answer] = await run_client(
        tmp_path, [("lookup", ["g"])], env(address, "tb1.0.x", TOOLBRIDGE_TLS_CA=pki.ca.cert)
    )
    assert answer["error"] == "TLSError"
    assert answer["retryable"] is False
    assert expected in answer["message"]
    assert "\n" not in answer["message"]


async def test_the_bridge_refuses_its_own_expired_certificate_at_start(pki: PKI, tmp_path: Path) -> None:
    old = pki.ca.issue("old-server", not_before=PAST[0], not_after=PAST[1])
    bridge = Bridge(journal=None, listen="127.0.0.1:0", tls_cert=old.cert, tls_key=old.key)
    with pytest.raises(TLSError, match=r"expired on 2020-01-02"):
        async with bridge:
            pass


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"tls_cert": "server.pem"}, "both a certificate and its key"),
        ({"tls_client_ca": "ca"}, "needs a certificate and key too"),
    ],
)
def test_half_a_tls_setting_is_refused(files: dict[str, str], message: str) -> None:
    with pytest.raises(TLSError, match=message):
        Bridge(journal=None, listen="127.0.0.1:0", **files)  # type: ignore[arg-type]


async def test_unusable_files_are_one_line_each(pki: PKI, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    other_key = pki.ca.issue("other-key").key
    cases = [
        ({"tls_cert": tmp_path / "missing.pem", "tls_key": pki.server.key}, "cannot be read"),
        ({"tls_cert": garbage, "tls_key": pki.server.key}, "not a certificate in PEM form"),
        ({"tls_cert": pki.server.cert, "tls_key": other_key}, "does not match the certificate"),
    ]
    for files, message in cases:
        bridge = Bridge(journal=None, listen="127.0.0.1:0", **files)  # type: ignore[arg-type]
        with pytest.raises(TLSError, match=message) as raised:
            async with bridge:
                pass
        assert "\n" not in str(raised.value)


def test_clear_text_off_loopback_is_refused_unless_insecure() -> None:
    with pytest.raises(TLSError, match="without TLS"):
        Bridge(journal=None, listen="0.0.0.0:0")
    Bridge(journal=None, listen="127.0.0.1:0")  # loopback: clear text is fine
    Bridge(journal=None, listen="[::1]:0")


async def test_insecure_serves_clear_text_off_loopback_with_a_warning() -> None:
    with pytest.warns(ClearTextWarning, match="clear text"):
        async with Bridge(journal=None, listen="0.0.0.0:0", insecure=True) as bridge:
            assert bridge.address.startswith("0.0.0.0:")
