"""The web view, served by the application while its bridge is open."""

import asyncio
import urllib.request

from toolbridge import Bridge


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        body: str = response.read().decode()
        return body


async def main() -> None:
    # --8<-- [start:serve]
    async with Bridge(journal="toolbridge.db") as bridge, bridge.serve_ui(port=0) as url:
        print("watch the runs at", url)  # port=0 picks a free port; 8766 is the CLI's default
        async with bridge.run("order-42") as step:
            await step.run("lookup", lambda: {"id": "cus_1"})
        # --8<-- [end:serve]
        page = await asyncio.to_thread(fetch, url)
        assert "<html" in page.lower(), page[:200]


asyncio.run(main())
