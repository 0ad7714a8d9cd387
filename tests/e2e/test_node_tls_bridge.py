"""A Node sandbox on "another host" (a plain process given only the variables) calls a Bridge
that serves mutual TLS: ``Bridge(listen=..., tls_cert=..., tls_key=..., tls_client_ca=...)``."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from tests.helpers import WAIT
from tests.tls_certs import make_ca, make_cert
from toolbridge import Bridge

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "node" / "index.js"
AGENT = f"""
const {{ tools }} = require({json.dumps(str(CLIENT))});
tools.lookup("sku-1").then(
  (value) => console.log(JSON.stringify({{ value }})),
  ({{ type, message }}) => console.log(JSON.stringify({{ type, message }})),
);
"""


async def _node(tmp_path: Path, env: dict[str, str]) -> dict[str, Any]:
    script = tmp_path / "agent.js"
    script.write_text(AGENT)
    process = await asyncio.create_subprocess_exec(
        "node",
        script,
        env={"PATH": os.environ["PATH"], **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 0, stderr.decode()
    outcome: dict[str, Any] = json.loads(stdout)
    return outcome


async def test_a_node_sandbox_calls_a_bridge_over_mutual_tls(tmp_path: Path) -> None:
    pki = tmp_path / "pki"
    pki.mkdir()
    ca = make_ca(pki)
    server = make_cert(pki, ca, "daemon", hosts=("127.0.0.1",))
    client = make_cert(pki, ca, "sandbox", hosts=(), client=True)
    looked_up: list[str] = []

    def lookup(sku: str) -> dict[str, str]:
        looked_up.append(sku)
        return {"sku": sku}

    bridge = Bridge(
        journal=tmp_path / "journal.db",
        listen="127.0.0.1:0",
        tools={"lookup": lookup},
        tls_cert=server.cert,
        tls_key=server.key,
        tls_client_ca=ca.cert,
    )
    async with bridge:
        minted = await bridge.mint_token(run_id="remote", tools=["lookup"], max_calls=5, ttl=600)
        assert minted.token is not None
        assert bridge.address.startswith("tls://127.0.0.1:")
        env = {"TOOLBRIDGE_ADDRESS": bridge.address, "TOOLBRIDGE_TOKEN": minted.token}
        env["TOOLBRIDGE_TLS_CA"] = str(ca.cert)
        with_certificate = env | {"TOOLBRIDGE_TLS_CERT": str(client.cert)}
        with_certificate["TOOLBRIDGE_TLS_KEY"] = str(client.key)
        assert await _node(tmp_path, with_certificate) == {"value": {"sku": "sku-1"}}
        refused = await _node(tmp_path, env)
    assert refused["type"] == "TLSError"
    assert refused["message"].startswith(f"the daemon at {bridge.address}: ")
    assert "TOOLBRIDGE_TLS_CERT" in refused["message"]
    assert looked_up == ["sku-1"]  # the call without a certificate never reached the tool
