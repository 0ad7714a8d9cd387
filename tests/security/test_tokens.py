"""Sandboxed code tries to call tools it was not given: another command's, with a forged
token, or with a token whose command has ended."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from toolbridge import Bridge

CALLER = """
import asyncio, json, os, sys
from inngest_tools import tools, ToolError
if len(sys.argv) > 2:
    os.environ["TOOLBRIDGE_TOKEN"] = sys.argv[2]
async def main():
    try:
        print(json.dumps({"result": await tools[sys.argv[1]]()}))
    except ToolError as exc:
        print(json.dumps({"error": exc.type, "message": exc.message}))
asyncio.run(main())
"""

# Looks through every process it can see for a token that is not its own.
TOKEN_HUNT = """
import json, os
own = os.environ["TOOLBRIDGE_TOKEN"]
found = []
for entry in os.listdir("/proc"):
    if entry.isdigit():
        try:
            environ = open(f"/proc/{entry}/environ", "rb").read()
        except OSError:
            continue
        for item in environ.split(b"\\0"):
            if item.startswith(b"TOOLBRIDGE_TOKEN=") and item.decode().split("=", 1)[1] != own:
                found.append(entry)
print(json.dumps(found))
"""


async def test_a_command_cannot_reach_another_commands_tools(
    sandboxed: Bridge, work_dir: Path, write_script: Callable[[str, str], Path]
) -> None:
    write_script("caller.py", CALLER)
    write_script("hunt.py", TOKEN_HUNT)
    other_running = asyncio.Event()
    release_other = asyncio.Event()

    async def hold() -> str:
        other_running.set()
        await release_other.wait()
        return "held"

    def payroll() -> str:
        return "the other command's data"

    async with sandboxed.run("two-commands") as step:
        other = asyncio.ensure_future(
            step.sandbox.commands.run(
                "other", "python3 caller.py hold", cwd=work_dir, tools={"hold": hold, "payroll": payroll}
            )
        )
        await asyncio.wait_for(other_running.wait(), 60)
        try:
            own_token = await step.sandbox.commands.run(
                "mine", "python3 caller.py payroll", cwd=work_dir, tools={"greet": lambda: "hi"}
            )
            hunt = await step.sandbox.commands.run("hunt", "python3 hunt.py", cwd=work_dir)
        finally:
            release_other.set()
        assert (await other).exit_code == 0
    # Its own token grants its own tools: another command's tool does not exist for it.
    assert json.loads(own_token.stdout) == {
        "error": "ToolNotFound",
        "message": "no tool named 'payroll' for this command",
    }
    # And the other command's token is nowhere it can see while that command runs.
    assert hunt.exit_code == 0, hunt.stderr
    assert json.loads(hunt.stdout) == []


async def test_forged_and_ended_tokens_are_refused(
    sandboxed: Bridge, work_dir: Path, write_script: Callable[[str, str], Path]
) -> None:
    write_script("caller.py", CALLER)
    write_script("show_token.py", "import os\nprint(os.environ['TOOLBRIDGE_TOKEN'])\n")
    tools = {"greet": lambda: "hi"}
    async with sandboxed.run("tokens") as step:
        first = await step.sandbox.commands.run("first", "python3 show_token.py", cwd=work_dir, tools=tools)
        ended_token = first.stdout.strip()
        prefix, token_id, secret = ended_token.split(".")
        forged_secret = f"{prefix}.{token_id}.{'A' * len(secret)}"
        attempts = {
            "ended": ended_token,
            "forged_secret": forged_secret,
            "made_up": "tb1.0123456789abcdef.not-a-secret",
            "malformed": "not-a-token",
        }
        answers = {}
        for label, token in attempts.items():
            result = await step.sandbox.commands.run(
                label, ["python3", "caller.py", "greet", token], cwd=work_dir, tools=tools
            )
            assert result.exit_code == 0, result.stderr
            answers[label] = json.loads(result.stdout)
        own = await step.sandbox.commands.run("own", "python3 caller.py greet", cwd=work_dir, tools=tools)
    refused = {"error": "Unauthenticated", "message": "missing, unknown, expired or revoked token"}
    assert answers == dict.fromkeys(attempts, refused)
    assert json.loads(own.stdout) == {"result": "hi"}  # the same call with its own token works
