"""The bubblewrap launcher: no network, no host files, no host environment, within limits."""

import asyncio
import os
from pathlib import Path

from toolbridge import Bridge, BwrapLauncher, SandboxLimits

MIB = 1024 * 1024

PROBE = """
import asyncio, os, socket
from inngest_tools import tools

try:
    socket.create_connection(("127.0.0.1", 22), timeout=2)
except OSError as error:
    print("network:", type(error).__name__)
print("journal:", os.path.exists(os.environ["JOURNAL"]))
print("secret:", os.environ.get("PAYMENTS_API_KEY"))
print("tool:", asyncio.run(tools.whoami()))
"""


async def main() -> None:
    os.environ["PAYMENTS_API_KEY"] = "sk_live_never_in_the_sandbox"  # the host's credentials
    folder = Path("agent")  # the command's own folder: it sees it read-only, and nothing beside
    folder.mkdir(exist_ok=True)
    # --8<-- [start:bwrap]
    launcher = BwrapLauncher(limits=SandboxLimits(memory=512 * MIB, processes=64, cpu_time=60))
    async with Bridge(journal="toolbridge.db", sandbox=launcher) as bridge:  # or sandbox="bwrap"
        async with bridge.run("probe-1") as step:
            result = await step.sandbox.commands.run(
                "probe",
                ["python3", "-c", PROBE],
                cwd=folder,
                tools={"whoami": lambda: "a tool, with the host's credentials"},
                env={"JOURNAL": os.path.abspath("toolbridge.db")},  # the host's journal file
            )
    print(result.stdout)
    # network: ConnectionRefusedError   (its own network namespace: only its own lo)
    # journal: False                    (only /usr, the runtime and its folder, read-only)
    # secret: None                      (a scrubbed environment, its own pid namespace)
    # tool: a tool, with the host's credentials
    # --8<-- [end:bwrap]
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "network: ConnectionRefusedError",
        "journal: False",
        "secret: None",
        "tool: a tool, with the host's credentials",
    ], result.stdout


asyncio.run(main())
