"""Egress under the process launcher: offered, not enforced. Placeholders still keep the
secret out of the command, but nothing stops it from going around the door; ``doctor`` says so."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import socket
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e.test_doctor import doctor
from tests.faces.conftest import log_in, open_url, serving
from toolbridge import Bridge, Egress, EgressRule, Secret

from .remote import Remote, WorldCA, remotes

CREDENTIAL = "sk-process-launcher-credential"

AGENT = """
import json, os, socket, sys, urllib.request
port = int(sys.argv[1])
request = urllib.request.Request(f"https://localhost:{port}/me",
                                 headers={"Authorization": "Bearer " + os.environ["API_TOKEN"]})
with urllib.request.urlopen(request, timeout=30) as answer:
    body = json.loads(answer.read())
around = socket.create_connection(("127.0.0.1", port), timeout=5)  # not enforced: it connects
around.close()
print(json.dumps({"bearer_ok": body["bearer_ok"], "held": os.environ["API_TOKEN"]}))
"""


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[tuple[WorldCA, Remote]]:
    ca = WorldCA(tmp_path)
    async with remotes(ca, CREDENTIAL, 1) as (server,):
        yield ca, server


async def test_placeholders_work_under_the_process_launcher(
    tmp_path: Path, world: tuple[WorldCA, Remote]
) -> None:
    ca, server = world
    (tmp_path / "agent.py").write_text(textwrap.dedent(AGENT))
    egress = Egress(
        allow=[f"localhost:{server.port}"],
        secrets=[Secret("API_TOKEN", CREDENTIAL, hosts=[f"localhost:{server.port}"])],
        upstream_ca=ca.path,
    )
    async with Bridge(journal=tmp_path / "j.db", sandbox="process") as bridge, bridge.run("p") as step:
        result = await step.sandbox.commands.run(
            "agent", ["python3", "agent.py", str(server.port)], cwd=tmp_path, egress=egress, timeout=60
        )
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["bearer_ok"] is True
    assert out["held"].startswith("tbsecret_")
    assert CREDENTIAL not in result.stdout


@pytest.mark.parametrize(
    ("sandbox", "status", "says"), [("process", "note", "offered, not enforced"), ("bwrap", "ok", "enforced")]
)
def test_doctor_says_whether_egress_is_enforced(tmp_path: Path, sandbox: str, status: str, says: str) -> None:
    _, checks, _ = doctor("--sandbox", sandbox, "--journal", str(tmp_path / "j.db"), cwd=tmp_path)
    assert checks["egress"].startswith(status)
    assert says in checks["egress"]


async def test_the_web_view_shows_each_request_and_no_value(
    tmp_path: Path, world: tuple[WorldCA, Remote]
) -> None:
    ca, server = world
    (tmp_path / "agent.py").write_text(textwrap.dedent(AGENT))
    journal = tmp_path / "j.db"
    host = f"localhost:{server.port}"
    egress = Egress(
        allow=[host], secrets=[Secret("API_TOKEN", CREDENTIAL, hosts=[host])], upstream_ca=ca.path
    )
    async with Bridge(journal=journal, sandbox="process") as bridge, bridge.run("viewed") as step:
        await step.sandbox.commands.run(
            "agent", ["python3", "agent.py", str(server.port)], cwd=tmp_path, egress=egress, timeout=60
        )
    async for login_url, _ in serving(
        "ui", "--journal", str(journal), "--port", "0", env=dict(os.environ), prefix="TOOLBRIDGE_UI_URL"
    ):
        url, cookie = await asyncio.to_thread(log_in, login_url)
        status, _, body = await asyncio.to_thread(
            open_url, url + "api/runs/viewed", headers={"cookie": cookie}
        )
        assert status == 200
        assert f"GET {host}".encode() in body
        assert b'"egress"' in body
        assert CREDENTIAL.encode() not in body


async def test_an_allowed_name_resolving_inside_is_refused_unless_private(
    tmp_path: Path, world: tuple[WorldCA, Remote]
) -> None:
    ca, server = world
    name = socket.gethostname()
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(name, server.port, type=socket.SOCK_STREAM)}
    except OSError:
        pytest.skip(f"this machine's name {name!r} does not resolve")
    if not all(ipaddress.ip_address(address).is_loopback for address in resolved):
        pytest.skip(f"this machine's name {name!r} does not resolve to loopback only")
    agent = textwrap.dedent(
        """
        import sys, urllib.error, urllib.request
        try:
            with urllib.request.urlopen(sys.argv[1], timeout=30) as answer:
                print(answer.status)
        except urllib.error.HTTPError as error:
            print(error.code, error.read().decode().strip())
        """
    )
    (tmp_path / "agent.py").write_text(agent)
    url = f"https://{name}:{server.port}/inside"
    said = []
    async with Bridge(journal=tmp_path / "j.db", sandbox="process") as bridge, bridge.run("inside") as step:
        for private in (False, True):
            egress = Egress(allow=[EgressRule(f"{name}:{server.port}", private=private)], upstream_ca=ca.path)
            result = await step.sandbox.commands.run(
                f"agent-{private}", ["python3", "agent.py", url], cwd=tmp_path, egress=egress, timeout=60
            )
            said.append(result.stdout.strip())
    assert said[0].startswith("403 toolbridge egress: ")
    assert "a non-public address" in said[0]
    assert said[1] == "200"
    assert [seen.path for seen in server.seen] == ["/inside"]


def test_a_secret_may_not_take_a_variable_toolbridge_sets() -> None:
    for name in ("PATH", "HTTPS_PROXY", "TOOLBRIDGE_TOKEN"):
        with pytest.raises(ValueError, match="toolbridge sets"):
            Secret(name, "v", hosts=["api.example.com"])
