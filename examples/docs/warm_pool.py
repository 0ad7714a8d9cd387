"""Warm sandboxes: snippets in sandboxes started ahead of need, each used once."""

import asyncio
import time

from toolbridge import Bridge

PRICES = {"sku_1": 12.5}


def get_price(sku: str) -> float:
    return PRICES[sku]


async def main() -> None:
    # --8<-- [start:warm]
    async with Bridge(journal="toolbridge.db", warm_sandboxes=2) as bridge, bridge.run("turn-1") as step:
        code = 'return await tools.getPrice("sku_1") * 2'
        timings = []
        for index in range(4):
            started = time.perf_counter()
            # The first snippet starts a sandbox of its own; once it has ended the pool fills
            # (2 per language). The next ones each take a warm sandbox, hand it their token and
            # code, and leave it to be discarded: a sandbox never runs a second snippet.
            total = await step.sandbox.python(f"price-{index}", code, tools={"getPrice": get_price})
            timings.append(time.perf_counter() - started)
            assert total == 25.0
            await asyncio.sleep(0.5)  # the model's turn: meanwhile the pool is topped up
    # Leaving the bridge lets every waiting sandbox go: nothing is left running.
    # --8<-- [end:warm]
    later = ", ".join(f"{seconds * 1000:.0f}" for seconds in timings[1:])
    print(f"the first snippet (cold) {timings[0] * 1000:.0f} ms, the next ones {later} ms")


asyncio.run(main())
