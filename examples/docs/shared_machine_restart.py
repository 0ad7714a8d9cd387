"""Entering a run another live bridge holds: wait for it (bounded), then RunBusyError naming it."""

import asyncio

from toolbridge import Bridge, RunBusyError


async def main() -> None:
    # --8<-- [start:wait]
    async with Bridge(journal="toolbridge.db") as holder, Bridge(journal="toolbridge.db") as other:
        async with holder.run("order-7") as step:
            await step.run("reserve", lambda: "seat 12")
            try:
                async with other.run("order-7", wait=0.5):  # the holder is alive: wait, then give up
                    pass
            except RunBusyError as busy:
                print(f"busy: held by a bridge of pid {busy.owner.split(':')[1]}")
        # The holder left: the next entry takes the run at once and replays its steps.
        async with other.run("order-7") as step:
            assert await step.run("reserve", lambda: "seat 99") == "seat 12"
    # --8<-- [end:wait]


asyncio.run(main())
