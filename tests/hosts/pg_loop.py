"""A daemon host for the PostgreSQL restart test (one process per namespace).

Usage: ``python pg_loop.py URL WORK NAME LEASE serve RUN HOLD_AT`` or ``... contend RUN``.

``serve`` enters run ``RUN`` and runs an agent in it that calls ``record(n)`` for n = 1, 3, 5, ...
(daemon ``a``; 2, 4, 6, ... on any other)
(``charge(n)``, at most once, when n is a multiple of 5; ``hold(n)`` when n is ``HOLD_AT``)
until ``WORK/stop`` exists, calling again after a retryable error as a careful sandbox does.
The agent appends each outcome to ``WORK/outcomes.jsonl``; every execution of a tool is
appended to the side-effect ledger ``WORK/../ledger.jsonl`` (shared by the daemons, in the
history checker's form). ``hold`` reports ``holding`` and waits for SIGUSR1. Once the command
ends the daemon reads the journal through its pool (``read``) and reports ``done``.

``contend`` tries to enter ``RUN`` again and again (``busy``, ``journal_error``), and reports
``entered`` if it ever gets it (then holds it until killed).

Reports are JSON lines on stdout.
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

from toolbridge import Bridge, JournalError, RunBusyError, RunLeaseLostError, ToolContext, ToolOptions, tool

AGENT = """
import asyncio, json, os, sys
from inngest_tools import tools, ToolError

async def main():
    hold_at, n, stride = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])  # each daemon its own n
    with open("outcomes.jsonl", "a") as out:
        while not os.path.exists("stop"):
            n += stride
            await asyncio.sleep(0.01)  # a sandbox's pace, not a wait
            name = "hold" if n == hold_at else "charge" if n % 5 == 0 else "record"
            attempts = 0
            while True:
                attempts += 1
                try:
                    said = {"result": await tools[name](n=n)}
                    break
                except ToolError as error:
                    if not error.retryable:
                        said = {"error": error.type, "message": str(error)}
                        break
                    await asyncio.sleep(0.1)
            out.write(json.dumps({"tool": name, "n": n, "attempts": attempts, **said}) + "\\n")
            out.flush()

asyncio.run(main())
"""

NUMBER = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def report(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def append(path: Path, record: dict[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)


def tools(ledger: Path, name: str, released: asyncio.Event) -> dict[str, Any]:
    def note(what: str, ctx: ToolContext) -> None:
        entry = {"what": what, "run": ctx.run_id, "key": ctx.step_key, "daemon": name, "at": time.time()}
        append(ledger, entry)

    async def hold(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        note(f"hold {args['n']}", ctx)
        report(event="holding", n=args["n"])
        await released.wait()
        return {"held": args["n"], "by": name}

    def record(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        note(f"record {args['n']}", ctx)
        return {"n": args["n"], "by": name}

    def charge(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        note(f"charge {args['n']}", ctx)
        return {"charged": args["n"], "by": name}

    return {
        "hold": tool.step(run=hold, input=NUMBER, description="waits for SIGUSR1"),
        "record": tool.step(run=record, input=NUMBER, description="notes a number"),
        "charge": tool.step(run=charge, input=NUMBER, at_most_once=True, description="at most once"),
    }


async def serve(
    bridge: Bridge, work: Path, run_id: str, hold_at: int, first: int, granted: dict[str, Any]
) -> int:
    (work / "agent.py").write_text(AGENT)
    try:
        async with bridge.run(run_id) as step:
            report(event="entered")
            result = await step.sandbox.commands.run(
                "agent",
                f"python agent.py {hold_at} {first - 2} 2",
                tools=granted,
                tool_options=ToolOptions(max_calls=100_000),
                cwd=work,
            )
    except RunLeaseLostError as exc:
        report(event="lease_lost", message=str(exc))
        return 3
    try:  # several reads at once: the pool's connections, made again after the restart
        read: int | str = len(await asyncio.gather(*(bridge.list_tokens() for _ in range(4))))
    except JournalError as exc:
        read = str(exc)
    report(event="done", exit_code=result.exit_code, stderr=result.stderr[-2000:], read=read)
    return 0


async def contend(bridge: Bridge, run_id: str, lease: float) -> int:
    while True:
        try:
            async with bridge.run(run_id, wait=0):
                report(event="entered")
                await asyncio.Event().wait()  # held until killed
        except RunBusyError as exc:
            report(event="busy", owner=exc.owner, expires_at=exc.expires_at)
        except JournalError as exc:
            report(event="journal_error", message=str(exc))
        await asyncio.sleep(lease / 10)  # the next look (the child's own pace, not a test's wait)


async def main(url: str, work: Path, name: str, lease: float, mode: str, run_id: str, hold_at: int) -> int:
    work.mkdir(exist_ok=True)
    released = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, released.set)
    granted = tools(work.parent / "ledger.jsonl", name, released)
    # "full": an acknowledged result outlives a crash of the server too.
    async with Bridge(journal=url, run_lease=lease, durability="full") as bridge:
        report(event="serving")
        if mode == "serve":
            return await serve(bridge, work, run_id, hold_at, 1 if name == "a" else 2, granted)
        return await contend(bridge, run_id, lease)


if __name__ == "__main__":
    url, work, name, lease, mode, run_id = sys.argv[1:7]
    hold_at = int(sys.argv[7]) if len(sys.argv) > 7 else 0
    sys.exit(asyncio.run(main(url, Path(work), name, float(lease), mode, run_id, hold_at)))
