# docs-sample: run by tests/faces/test_web_docs_examples.py
"""Serve the web view from a host program: the login URL is for the person who decides.

Run it with a journal path; it records one run, prints the login URL and serves until you
press Enter (or close its stdin).
"""

import asyncio
import sys

from toolbridge import Bridge


def lookup(sku: str) -> dict[str, object]:
    return {"sku": sku, "stock": 7}


async def main(journal: str) -> None:
    async with Bridge(journal=journal, tools={"lookup": lookup}) as bridge:
        await bridge.call_tool("lookup", ["a1"], run_id="order-42")
        async with bridge.serve_ui(port=0) as login_url:
            # Printed once, to you: opening it logs one browser in, and the token is then spent.
            # Never hand it (or put it in an environment) to a sandbox.
            print(f"TOOLBRIDGE_UI_URL={login_url}", flush=True)
            await asyncio.to_thread(sys.stdin.read)  # serve until stdin closes


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "toolbridge.db"))
