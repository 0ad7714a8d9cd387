"""A sandboxed script runs `gh` and `git`; the host decides what each run does."""

import asyncio
import tempfile
from pathlib import Path

from toolbridge import Bridge, ShimCall, tool


def gh(call: ShimCall) -> object:
    if call.argv[:2] == ("repo", "delete"):
        return call.refuse("deleting repositories is not allowed here")
    if call.argv[:2] == ("auth", "status"):
        # The privileged work happens here, in the app, which holds the credentials.
        return call.reply(stdout="Logged in to github.com as the app\n")
    return call.refuse(f"gh {' '.join(call.argv)} is not offered", exit_code=2)


def git(call: ShimCall) -> object:
    # The real git runs on the host, outside the sandbox, with the environment chosen here
    # (a credential could go in it: it is never journaled); its output streams back.
    return call.run(["git", *call.argv], env={"PATH": "/usr/bin:/bin", "GIT_TERMINAL_PROMPT": "0"})


AGENT = """
import subprocess
print(subprocess.run(["gh", "auth", "status"], capture_output=True, text=True).stdout, end="")
print(subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.split()[0])
refused = subprocess.run(["gh", "repo", "delete", "acme/site"], capture_output=True, text=True)
print(refused.returncode, refused.stderr, end="")
"""


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        async with Bridge(journal=Path(folder) / "journal.db") as bridge, bridge.run("shims") as step:
            result = await step.sandbox.commands.run(
                "agent",
                ["python3", "-c", AGENT],
                tools={"gh": tool.shim("gh", gh), "git": tool.shim("git", git)},
            )
    print(result.stdout, end="")


asyncio.run(main())
