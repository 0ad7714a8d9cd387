"""Sidecar mode: a process started elsewhere calls the bridge's tools with a minted token."""

import asyncio
import os
import sys

from toolbridge import Bridge

CLIENT = """
import asyncio
from inngest_tools import tools

async def main():
    customer = await tools.getCustomer("cus_1")
    print(customer["name"])

asyncio.run(main())
"""


def get_customer(id: str) -> dict[str, str]:
    return {"id": id, "name": "Acme Corp"}


async def main() -> None:
    # --8<-- [start:sidecar]
    bridge = Bridge(journal="toolbridge.db", tools={"getCustomer": get_customer})
    async with bridge:
        token = await bridge.mint_token(run_id="vm-7", tools=["getCustomer"], max_calls=50, ttl=7200)
        # A container or a VM started by someone else needs only these two variables (and
        # inngest_tools installed: `pip install inngest-tools` or `npm install inngest_tools`).
        env = {"TOOLBRIDGE_ADDRESS": str(bridge.address), "TOOLBRIDGE_TOKEN": str(token.token)}
        sandbox = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CLIENT,
            env={**env, "PATH": os.environ["PATH"]},
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await sandbox.communicate()
        assert out == b"Acme Corp\n"
        assert [listed.id for listed in await bridge.list_tokens()] == [token.id]
        assert await bridge.revoke_token(token.id)  # refused at once, even on an open stream
    # --8<-- [end:sidecar]


asyncio.run(main())
