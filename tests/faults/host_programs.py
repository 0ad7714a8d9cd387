"""Host programs the fault tests run as real processes, to signal or kill them mid-run.

Each is the whole program a user would write: a ``Bridge`` embedded in ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator

from tests.helpers import WAIT


@contextlib.asynccontextmanager
async def sigkilled_at_the_end(host: asyncio.subprocess.Process) -> AsyncIterator[None]:
    """Kill ``host`` with SIGKILL once the block is done (and reap it even if the block fails)."""
    try:
        yield
        host.send_signal(signal.SIGKILL)
        await asyncio.wait_for(host.wait(), WAIT)
    finally:
        if host.returncode is None:
            host.kill()
            await host.wait()


GRACEFUL_HOST = """
import asyncio, sys
from toolbridge import Bridge, tool

journal, sandbox, work, marker = sys.argv[1:5]

async def refund(args, ctx):
    print("tool started", flush=True)
    await asyncio.sleep(0.5)  # the refund's own work, in flight when SIGTERM arrives
    return {"refunded": True}

async def main():
    # A grace far longer than the test waits: closing must return when the call ends.
    async with Bridge(journal=journal, sandbox=sandbox, shutdown_grace=3600) as bridge:
        bridge.install_signal_handlers()
        async with bridge.run("order-1") as step:
            await step.sandbox.commands.run(
                "agent", ["python3", "agent.py", marker], tools={"refund": tool.step(run=refund)}, cwd=work
            )
        print("the command ended by itself", flush=True)

try:
    asyncio.run(main())
finally:
    print("closed", flush=True)
"""

AGENT = """
import asyncio, json, os, sys, time
from inngest_tools import tools

print(json.dumps(asyncio.run(tools.refund())), flush=True)
if os.path.exists("hold"):
    time.sleep(300)  # still running when the host is told to stop
"""

SLEEPING_HOST = """
import asyncio, sys
from toolbridge import Bridge

journal, sandbox, work, marker = sys.argv[1:5]
run_lease = float(sys.argv[5]) if len(sys.argv) > 5 else 30.0
in_background = len(sys.argv) > 6 and sys.argv[6] == "background"

async def main():
    async with Bridge(journal=journal, sandbox=sandbox, run_lease=run_lease) as bridge:
        print(bridge.address, flush=True)
        async with bridge.run("sleepy") as step:
            # Makes no calls: nothing but the kernel notices when the daemon dies.
            sleeper = ["python3", "-c", "import time; time.sleep(300)", marker]
            if in_background:
                # The shell is the command; its child does not inherit the parent-death signal.
                sleeper = ["sh", "-c", 'python3 -c "import time; time.sleep(300)" "$0" & wait', marker]
            await step.sandbox.commands.run("sleeper", sleeper, cwd=work)

asyncio.run(main())
"""
