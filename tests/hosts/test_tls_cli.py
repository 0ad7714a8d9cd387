"""``toolbridge serve`` with TLS flags: the printed address works from a sandbox's environment
alone, clear text off loopback is refused unless ``--insecure``, and the daemon's side of a
refused client is a line on its standard error."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.hosts.sandbox import run_client
from tests.tls_certs import CA, new_ca

TOOLBRIDGE = str(Path(sys.executable).with_name("toolbridge"))
WAIT = 60.0

APP = """
from toolbridge import Bridge

bridge = Bridge(journal={journal!r})

@bridge.tool
def lookup(sku: str) -> dict:
    return {{"sku": sku}}
"""


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "app"
    directory.mkdir()
    (directory / "tls_app.py").write_text(textwrap.dedent(APP.format(journal=str(tmp_path / "j.db"))))
    return directory


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return new_ca(tmp_path_factory.mktemp("pki"))


async def toolbridge(cwd: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE, *args, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


async def serving(app_dir: Path, *flags: str) -> AsyncIterator[tuple[str, asyncio.subprocess.Process]]:
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE, "serve", "tls_app:bridge", *flags,
        cwd=app_dir, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        # gRPC's default verbosity, which logs each refused handshake (a quieter one is a choice).
        env={name: value for name, value in os.environ.items() if name != "GRPC_VERBOSITY"},
    )  # fmt: skip
    assert process.stdout is not None
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), WAIT)).decode().strip()
        assert line.startswith("TOOLBRIDGE_ADDRESS="), line
        yield line.removeprefix("TOOLBRIDGE_ADDRESS="), process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), WAIT)


async def mint(app_dir: Path) -> str:
    status, stdout, stderr = await toolbridge(
        app_dir, "token", "mint", "tls_app:bridge", "--run", "r", "--all-tools"
    )
    assert status == 0, stderr
    return stdout.strip()


async def test_serve_over_mutual_tls_and_a_sandbox_calls_with_its_environment(
    app_dir: Path, ca: CA, tmp_path: Path
) -> None:
    server, client = ca.issue("cli-server"), ca.issue("cli-client", client=True, hosts=())
    token = await mint(app_dir)
    flags = ("--listen", "127.0.0.1:0", "--tls-cert", str(server.cert), "--tls-key", str(server.key))
    async for address, process in serving(app_dir, *flags, "--tls-client-ca", str(ca.cert)):
        assert address.startswith("tls://127.0.0.1:")
        sandbox_env = {
            "TOOLBRIDGE_ADDRESS": address,
            "TOOLBRIDGE_TOKEN": token,
            "TOOLBRIDGE_TLS_CA": str(ca.cert),
        }
        mutual = {
            **sandbox_env,
            "TOOLBRIDGE_TLS_CERT": str(client.cert),
            "TOOLBRIDGE_TLS_KEY": str(client.key),
        }
        assert await run_client(tmp_path, [("lookup", ["a"])], mutual) == [{"result": {"sku": "a"}}]
        [refused] = await run_client(tmp_path, [("lookup", ["b"])], sandbox_env)
        assert refused["error"] == "TLSError"
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), WAIT)
        assert process.stderr is not None
        log = (await process.stderr.read()).decode()
        # The daemon's side: gRPC's one line per refused handshake.
        assert "PEER_DID_NOT_RETURN_A_CERTIFICATE" in log


async def test_serve_refuses_clear_text_off_loopback(app_dir: Path) -> None:
    status, stdout, stderr = await toolbridge(app_dir, "serve", "tls_app:bridge", "--listen", "0.0.0.0:0")
    assert status == 2
    assert stdout == ""
    assert "without TLS" in stderr
    assert "--insecure" in stderr
    assert len(stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--listen", "127.0.0.1:0", "--tls-cert", "x.pem"], "both a certificate and its key"),
        (["--tls-cert", "x.pem", "--tls-key", "x.key"], "add --listen"),
        (["--listen", "127.0.0.1:0", "--tls-cert", "x.pem", "--tls-key", "x.key"], "cannot be read"),
    ],
)
async def test_serve_names_a_bad_tls_flag_in_one_line(app_dir: Path, flags: list[str], message: str) -> None:
    status, _, stderr = await toolbridge(app_dir, "serve", "tls_app:bridge", *flags)
    assert status == 2
    assert message in stderr
    assert len(stderr.strip().splitlines()) == 1
