"""A sidecar served over mutual TLS, and a sandbox calling it with its environment alone."""

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from toolbridge import Bridge

CLIENT = """
import asyncio
from inngest_tools import tools

async def main():
    print((await tools.getCustomer("cus_1"))["name"])

asyncio.run(main())
"""


def get_customer(id: str) -> dict[str, str]:
    return {"id": id, "name": "Acme Corp"}


async def main() -> None:
    # The certificates of tls_make_certs.sh, made here in the current directory.
    subprocess.run(
        ["sh", str(Path(__file__).with_name("tls_make_certs.sh"))], check=True, capture_output=True
    )
    # --8<-- [start:serve]
    bridge = Bridge(
        journal="toolbridge.db",
        tools={"getCustomer": get_customer},
        listen="127.0.0.1:0",  # on a real network: the host's address, e.g. "10.0.4.2:7443"
        tls_cert="daemon.pem",
        tls_key="daemon.key",
        tls_client_ca="ca.pem",  # mutual TLS: sandboxes need a certificate from this CA
    )
    async with bridge:
        token = await bridge.mint_token(run_id="vm-7", tools=["getCustomer"], max_calls=50, ttl=7200)
        env = {
            "TOOLBRIDGE_ADDRESS": bridge.address,  # tls://127.0.0.1:PORT
            "TOOLBRIDGE_TOKEN": str(token.token),
            "TOOLBRIDGE_TLS_CA": "ca.pem",
            "TOOLBRIDGE_TLS_CERT": "sandbox.pem",
            "TOOLBRIDGE_TLS_KEY": "sandbox.key",
        }
        # --8<-- [end:serve]
        assert bridge.address.startswith("tls://")
        sandbox = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CLIENT,
            env={**env, "PATH": os.environ["PATH"]},
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await sandbox.communicate()
        assert out == b"Acme Corp\n", out


asyncio.run(main())
