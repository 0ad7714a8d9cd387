"""Sidecar mode from the command line: `toolbridge serve` in one process, `toolbridge token`
in others, and a sandbox started elsewhere calling in with the minted token."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import textwrap
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.test_sidecar import sandbox_elsewhere

TOOLBRIDGE = str(Path(sys.executable).with_name("toolbridge"))
WAIT = 60.0

APP = """
from toolbridge import Bridge

bridge = Bridge(journal={journal!r})

@bridge.tool
def lookup(sku: str) -> dict:
    return {{"sku": sku, "stock": 7}}

@bridge.tool
def payroll() -> str:
    return "not for sidecars"
"""


async def toolbridge(cwd: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE, *args, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


@dataclass
class Served:
    address: str
    process: asyncio.subprocess.Process


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "app"
    directory.mkdir()
    (directory / "sidecar_app.py").write_text(textwrap.dedent(APP.format(journal=str(tmp_path / "j.db"))))
    return directory


async def _serve(app_dir: Path, *where: str) -> AsyncIterator[Served]:
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE,
        "serve",
        "sidecar_app:bridge",
        *where,
        cwd=app_dir,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), WAIT)).decode().strip()
        assert line.startswith("TOOLBRIDGE_ADDRESS="), line
        yield Served(line.removeprefix("TOOLBRIDGE_ADDRESS="), process)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), WAIT)


@pytest.fixture
async def served_on_socket(app_dir: Path, tmp_path: Path) -> AsyncIterator[Served]:
    async for served in _serve(app_dir, "--socket", str(tmp_path / "sidecar.sock")):
        yield served


async def test_serve_mint_call_revoke_from_the_command_line(
    served_on_socket: Served, app_dir: Path, tmp_path: Path
) -> None:
    assert served_on_socket.address == f"unix:{tmp_path / 'sidecar.sock'}"
    status, token, _ = await toolbridge(
        app_dir, "token", "mint", "sidecar_app:bridge", "--run", "vm-1", "--tool", "lookup", "--ttl", "10m"
    )
    assert status == 0
    token = token.strip()
    answers = await sandbox_elsewhere(
        tmp_path, served_on_socket.address, token, [("lookup", ["sku-9"]), ("payroll", [])]
    )
    assert answers == [{"result": {"sku": "sku-9", "stock": 7}}, {"error": "ToolNotFound"}]

    status, listed, _ = await toolbridge(app_dir, "token", "list", "sidecar_app:bridge", "--json")
    assert status == 0
    (entry,) = json.loads(listed)
    # One call counted: a tool the token does not grant is refused before it counts.
    assert (entry["run_id"], entry["tools"], entry["active"], entry["calls"]) == ("vm-1", ["lookup"], True, 1)
    assert "token" not in entry
    assert entry["id"] == token.split(".")[1]

    status, _, said = await toolbridge(app_dir, "token", "revoke", "sidecar_app:bridge", entry["id"])
    assert (status, said.strip()) == (0, f"toolbridge: revoked token {entry['id']}")
    # `serve` runs in another process: it sees the revocation at the next call.
    answers = await sandbox_elsewhere(tmp_path, served_on_socket.address, token, [("lookup", ["sku-9"])])
    assert answers == [{"error": "Unauthenticated"}]

    status, _, said = await toolbridge(app_dir, "token", "revoke", "sidecar_app:bridge", entry["id"])
    assert status == 2
    assert "no active token" in said


async def test_serve_on_tcp_and_stop_on_sigterm(app_dir: Path, tmp_path: Path) -> None:
    status, token, _ = await toolbridge(
        app_dir, "token", "mint", "sidecar_app:bridge", "--run", "vm-2", "--all-tools", "--json"
    )
    assert status == 0
    minted = json.loads(token)
    assert sorted(minted["tools"]) == ["lookup", "payroll"]
    async for served in _serve(app_dir, "--listen", "127.0.0.1:0"):
        host, port = served.address.rsplit(":", 1)
        assert host == "127.0.0.1"
        assert int(port) > 0
        answers = await sandbox_elsewhere(tmp_path, served.address, minted["token"], [("payroll", [])])
        assert answers == [{"result": "not for sidecars"}]
        served.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(served.process.wait(), WAIT) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--run", "r"], "name the tools"),
        (["--run", "r", "--tool", "nope"], "no registered tool named 'nope'"),
        (["--run", "r", "--tool", "lookup", "--ttl", "soon"], "is not a duration"),
        (["--run", "r", "--tool", "lookup", "--max-calls", "0"], "max_calls"),
    ],
)
async def test_mint_refuses_bad_requests(app_dir: Path, args: list[str], message: str) -> None:
    status, stdout, stderr = await toolbridge(app_dir, "token", "mint", "sidecar_app:bridge", *args)
    assert status == 2
    assert stdout == ""
    assert message in stderr


async def test_serve_warns_when_listening_beyond_loopback(app_dir: Path) -> None:
    # Refused without --insecure: tests/hosts/test_tls_cli.py.
    async for served in _serve(app_dir, "--listen", "0.0.0.0:0", "--insecure"):
        served.process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(served.process.wait(), WAIT)
        assert served.process.stderr is not None
        warning = (await served.process.stderr.read()).decode()
        assert "without TLS" in warning
        assert "clear text" in warning
