"""A host that forgets ``await bridge.aclose()`` still exits: the journal's thread is a daemon."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path

from tests.helpers import WAIT

FORGETFUL_HOST = textwrap.dedent(
    """
    import asyncio, sys, threading
    from toolbridge import Bridge

    async def main():
        bridge = Bridge(journal=sys.argv[1])
        await bridge.__aenter__()  # opened, entered a run, and never closed
        async with bridge.run("forgotten"):
            pass
        workers = [t for t in threading.enumerate() if "_connection_worker_thread" in t.name]
        print(len(workers), all(t.daemon for t in workers), flush=True)

    asyncio.run(main())
    """
)


async def test_a_host_that_never_closes_its_bridge_exits(tmp_path: Path) -> None:
    host = tmp_path / "host.py"
    host.write_text(FORGETFUL_HOST)
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(host), str(tmp_path / "journal.db"), stdout=asyncio.subprocess.PIPE
    )
    try:
        stdout, _ = await asyncio.wait_for(process.communicate(), WAIT)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0
    assert stdout.split() == [b"1", b"True"]
