"""Secrets in a tool's arguments and result: usable by the tool and the sandbox, never stored in clear."""

import asyncio
import os
import stat
from pathlib import Path

from pydantic import BaseModel, SecretStr

from toolbridge import Bridge, tool

minted: list[str] = []


# --8<-- [start:secrets]
class Login(BaseModel):
    user: str
    password: SecretStr  # journaled as a keyed hash, never in clear


class Minted(BaseModel):
    user: str
    api_key: SecretStr  # journaled sealed (AES-GCM), delivered usable


def mint_key(args: Login) -> Minted:
    minted.append(args.user)
    return Minted(user=args.user, api_key=SecretStr("sk-live-" + args.password.get_secret_value()[::-1]))


TOOLS = {"mint_key": tool.step(input=Login, output=Minted, run=mint_key)}


async def main() -> None:
    async with Bridge(journal="toolbridge.db", tools=TOOLS) as bridge:
        login = {"user": "ada", "password": "hunter2"}
        first = await bridge.call_tool("mint_key", login, run_id="onboard-ada")
        again = await bridge.call_tool("mint_key", login, run_id="onboard-ada")  # a replay
        # The journal, its -wal and -shm, and the key beside it are the host's alone.
        for name in ("toolbridge.db", "toolbridge.db-wal", "toolbridge.db-shm", "toolbridge.db.key"):
            assert stat.S_IMODE(os.stat(name).st_mode) == 0o600
    assert first == again == {"user": "ada", "api_key": "sk-live-2retnuh"}
    assert minted == ["ada"]  # the replay opened the seal; the tool did not run again
    kept = b"".join(p.read_bytes() for p in Path().glob("toolbridge.db*") if p.suffix != ".key")
    assert b"hunter2" not in kept
    assert b"sk-live" not in kept


# --8<-- [end:secrets]


asyncio.run(main())
