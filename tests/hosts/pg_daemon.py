"""A daemon host for the journal partition tests (one process per namespace).

Usage: ``python pg_daemon.py URL WORK NAME LEASE [hold] [again]``

Enters run ``jr`` (waiting while another daemon holds it) and runs an agent in it that calls
the tool ``work`` for 1, 2 and 3. With ``hold``, the first entry's work(2) reports ``holding``
and waits for SIGUSR1. The agent prints each answer; on an error it says so on
``WORK/agent-said`` (a FIFO) and waits for ``WORK/agent-go`` before it exits, so the test
decides when the command ends. With ``again``, a daemon whose run was taken over enters it
again (and takes it back once the other's lease ends). Every execution of ``work`` is
appended to ``WORK/ledger.jsonl`` (with its run, step key and time, as the history checker
reads it). Reports are JSON lines on stdout: ``serving``, ``busy``, ``entered``, ``holding``,
``done`` (with the agent's output), ``lease_lost``, ``journal_error``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from toolbridge import Bridge, JournalError, RunBusyError, RunLeaseLostError, ToolContext, tool

AGENT = """
import asyncio, json
from inngest_tools import tools, ToolError

async def main():
    for n in (1, 2, 3):
        try:
            print(json.dumps({"n": n, "value": await tools.work(n=n)}), flush=True)
        except ToolError as error:
            print(json.dumps({"n": n, "error": error.type, "retryable": error.retryable}), flush=True)
            with open("agent-said", "w") as said:  # in its working folder, the daemon's WORK
                said.write(error.type + "\\n")
            with open("agent-go") as go:
                go.read()
            raise SystemExit(3)

asyncio.run(main())
"""


def report(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def append(path: Path, record: dict[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)


NUMBER = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


async def main(url: str, work: Path, name: str, lease: float, flags: set[str]) -> int:
    released = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, released.set)
    entries = 0

    async def work_tool(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        n = args["n"]
        entry = {"step": n, "daemon": name, "what": f"work {n}", "run": ctx.run_id, "key": ctx.step_key}
        append(work / "ledger.jsonl", {**entry, "at": time.time()})
        if "hold" in flags and entries == 1 and n == 2:
            report(event="holding")
            await released.wait()
        return {"n": n, "by": name}

    granted = {"work": tool.step(run=work_tool, input=NUMBER, description="notes a number")}
    (work / "agent.py").write_text(AGENT)
    async with Bridge(journal=url, run_lease=lease) as bridge:
        report(event="serving")
        while True:
            try:
                async with bridge.run("jr") as step:
                    entries += 1
                    report(event="entered")
                    result = await step.sandbox.commands.run(
                        "agent", "python agent.py", tools=granted, cwd=work
                    )
                report(event="done", exit_code=result.exit_code, stdout=result.stdout, stderr=result.stderr)
                return 0
            except RunBusyError as exc:
                report(event="busy", owner=exc.owner)
                await asyncio.sleep(lease / 10)
            except RunLeaseLostError as exc:
                report(event="lease_lost", message=str(exc))
                if "again" not in flags:
                    return 3
            except JournalError as exc:
                report(event="journal_error", message=str(exc))
                return 4


if __name__ == "__main__":
    url, work, name, lease = sys.argv[1:5]
    sys.exit(asyncio.run(main(url, Path(work), name, float(lease), set(sys.argv[5:]))))
