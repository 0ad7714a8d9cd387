"""The journal on PostgreSQL: the same API, shared by every daemon pointed at it.

Run with TOOLBRIDGE_JOURNAL=postgresql://user:secret@host:5432/db in the environment.
"""

import asyncio
import os

from toolbridge import Bridge, RunBusyError


def charge(order_id: str) -> str:
    return f"charged {order_id}"


async def main() -> None:
    assert os.environ["TOOLBRIDGE_JOURNAL"].startswith("postgresql://")
    # --8<-- [start:fleet]
    # journal= left out: each host reads TOOLBRIDGE_JOURNAL (or pass the URL itself)
    host_a = Bridge(tools={"charge": charge}, run_lease=30)
    host_b = Bridge(tools={"charge": charge}, run_lease=30)
    async with host_a, host_b:
        async with host_a.run("order-42") as step:
            # While host A holds the run, host B cannot enter it (wait=0: do not wait for A) ...
            try:
                async with host_b.run("order-42", wait=0):
                    raise AssertionError("two holders")
            except RunBusyError as busy:
                print(busy)  # names the holder and when its lease expires
            first = await step.sandbox.python("pay", 'return await tools.charge("o-42")', tools=host_a.tools)
        # ... and once A has left it, B replays what A recorded: nothing runs twice.
        async with host_b.run("order-42") as step:
            again = await step.sandbox.python("pay", 'return await tools.charge("o-42")', tools=host_b.tools)
    # --8<-- [end:fleet]
    assert first == again == "charged o-42"


asyncio.run(main())
