"""Egress under the process launcher: offered, not enforced. Placeholders still keep the
secret out of the command, but nothing stops it from going around the door; ``doctor`` says so."""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e.test_doctor import doctor
from toolbridge import Bridge, Egress, Secret

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
