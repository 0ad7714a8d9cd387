"""The web view, served by the application while its bridge is open."""

import asyncio
import http.cookiejar
import urllib.request

from toolbridge import Bridge


def fetch(url: str) -> str:
    # The URL logs in once (its token is then spent) and sets a session cookie: keep it.
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    with browser.open(url, timeout=10) as response:
        body: str = response.read().decode()
        return body


async def main() -> None:
    # --8<-- [start:serve]
    async with Bridge(journal="toolbridge.db") as bridge, bridge.serve_ui(port=0) as url:
        print("log in at", url)  # a one-time login URL; port=0 picks a free port
        async with bridge.run("order-42") as step:
            await step.run("lookup", lambda: {"id": "cus_1"})
        # --8<-- [end:serve]
        page = await asyncio.to_thread(fetch, url)
        assert "<html" in page.lower(), page[:200]


asyncio.run(main())
