"""The other TCP faces with the same three TLS flags: ``toolbridge mcp --http`` and
``toolbridge ui`` serve HTTPS (mutual TLS with ``--tls-client-ca``), and ``mcp --http`` off
loopback without TLS is refused unless ``--insecure``."""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.faces.conftest import TOOLBRIDGE, app_env, serving
from tests.tls_certs import CA, new_ca
from toolbridge import Bridge

TARGET = "tests.faces.app:bridge"
WAIT = 60.0
PING = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return new_ca(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def faces_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "app"
    directory.mkdir()
    os.mkfifo(directory / "gate")
    return directory


def fetch(url: str, context: ssl.SSLContext | None, body: bytes | None = None, token: str = "") -> int:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, body, headers)
    try:
        with urllib.request.urlopen(request, timeout=WAIT, context=context) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def client_context(ca: CA, *, certificate: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca.cert)
    if certificate:
        issued = ca.issue("face-client", client=True, hosts=())
        context.load_cert_chain(issued.cert, issued.key)
    return context


async def test_mcp_over_mutual_tls(faces_dir: Path, ca: CA) -> None:
    server = ca.issue("mcp-server")
    flags = ["--tls-cert", str(server.cert), "--tls-key", str(server.key), "--tls-client-ca", str(ca.cert)]
    async for url, process in serving(
        "mcp", TARGET, "--http", "127.0.0.1:0", *flags, env=app_env(faces_dir), prefix="TOOLBRIDGE_MCP_URL"
    ):
        assert url.startswith("https://127.0.0.1:")
        assert process.stdout is not None
        token = (await asyncio.wait_for(process.stdout.readline(), WAIT)).decode().strip().partition("=")[2]
        mutual = client_context(ca, certificate=True)
        assert await asyncio.to_thread(fetch, url, mutual, PING, token) == 200
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            await asyncio.to_thread(fetch, url, client_context(ca, certificate=False), PING, token)


async def test_mcp_off_loopback_without_tls_is_refused(faces_dir: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE,
        "mcp",
        TARGET,
        "--http",
        "0.0.0.0:0",
        env=app_env(faces_dir),
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 2
    assert "without TLS" in stderr.decode()
    assert "--insecure" in stderr.decode()


async def test_the_web_view_over_tls(faces_dir: Path, ca: CA, tmp_path: Path) -> None:
    server = ca.issue("ui-server")
    flags = ["--tls-cert", str(server.cert), "--tls-key", str(server.key)]
    journal = tmp_path / "j.db"
    async with Bridge(journal=journal):
        pass  # a journal for the view to show
    async for url, _ in serving(
        "ui",
        "--journal",
        str(journal),
        "--port",
        "0",
        *flags,
        env=app_env(faces_dir),
        prefix="TOOLBRIDGE_UI_URL",
    ):
        assert url.startswith("https://127.0.0.1:")
        assert await asyncio.to_thread(fetch, url, client_context(ca, certificate=False)) in (200, 401, 403)
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # clear text gets no page
            await asyncio.to_thread(fetch, url.replace("https://", "http://"), None)
