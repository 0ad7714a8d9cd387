"""A daemon host for the multi-host tests: one process per "host", each with its own socket dir.

Usage:
    python host.py zombie URL WORK NAME LEASE
        Enter run ``zombie`` (waiting while another host holds it) and run WORK/agent.py in
        it, which calls the tool ``work`` for 1, 2 and 3. Host ``a``'s call of work(2) reports
        ``holding`` and waits for SIGUSR1, so a test can pause the host while it holds the run.
    python host.py soak URL WORK NAME LEASE JOBS
        Serve with ``recover=True``; with JOBS > 0 send that many ``job/start`` events, each
        starting the durable function ``job`` (five steps). Runs until killed.

Every step body appends ``{"run", "step", "host", "nonce"}`` to WORK/invocations.jsonl before
it returns; every result a function receives back from a step is appended to WORK/acks.jsonl.
Reports (one JSON object per line) go to stdout.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import sys
from pathlib import Path
from typing import Any

from toolbridge import Bridge, FunctionContext, RunBusyError, RunLeaseLostError, event_type

AGENT = """
import asyncio, json
from inngest_tools import tools, ToolError

async def main():
    for n in (1, 2, 3):
        try:
            print(json.dumps({"n": n, "value": await tools.work(n)}), flush=True)
        except ToolError as error:
            print(json.dumps({"n": n, "error": error.type, "message": error.message}), flush=True)
            raise SystemExit(3)

asyncio.run(main())
"""


def report(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def append(path: Path, record: dict[str, Any]) -> None:
    # One write() with O_APPEND: lines from several processes never interleave, and a line
    # written before a SIGKILL is kept by the kernel.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)


async def zombie(url: str, work: Path, name: str, lease: float) -> int:
    released = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, released.set)

    async def work_tool(n: int) -> dict[str, Any]:
        append(work / "invocations.jsonl", {"run": "zombie", "step": n, "host": name})
        if name == "a" and n == 2:
            report(event="holding")
            await released.wait()  # the test pauses this host meanwhile, then sends SIGUSR1
        return {"n": n, "by": name}

    (work / "agent.py").write_text(AGENT)
    async with Bridge(journal=url, run_lease=lease) as bridge:
        report(event="serving")
        while True:
            try:
                async with bridge.run("zombie") as step:
                    report(event="entered")
                    result = await step.sandbox.commands.run(
                        "agent", "python agent.py", tools={"work": work_tool}, cwd=work
                    )
                report(event="done", exit_code=result.exit_code, stdout=result.stdout, stderr=result.stderr)
                return 0
            except RunBusyError as exc:
                report(event="busy", owner=exc.owner)
                await asyncio.sleep(lease / 10)
            except RunLeaseLostError as exc:
                report(event="lease_lost", message=str(exc))
                return 3


async def soak(url: str, work: Path, name: str, lease: float, jobs: int) -> int:
    bridge = Bridge(journal=url, run_lease=lease, recover=True)

    @bridge.function(id="job", trigger=event_type("job/start"))
    async def job(ctx: FunctionContext) -> dict[str, Any]:
        values = []
        for index in range(5):
            step = f"s{index}"

            async def body(step: str = step) -> dict[str, Any]:
                nonce = secrets.token_hex(6)
                append(
                    work / "invocations.jsonl",
                    {"run": ctx.run_id, "step": step, "host": name, "nonce": nonce},
                )
                report(event="step", run=ctx.run_id, step=step)
                await asyncio.sleep(0.1)  # the step's work: a kill may land in the middle of it
                return {"nonce": nonce}

            value = await ctx.step.run(step, body)
            append(work / "acks.jsonl", {"run": ctx.run_id, "step": step, "nonce": value["nonce"]})
            values.append(value["nonce"])
        return {"nonces": values}

    async with bridge:
        report(event="serving")
        for _ in range(jobs):  # a job every 0.2 s: the host stays busy for a while
            await bridge.send_event("job/start", {"by": name})
            await asyncio.sleep(0.2)
        report(event="jobs_sent")
        await asyncio.Event().wait()
    return 0


def main() -> int:
    mode, url, work, name, lease = sys.argv[1:6]
    if mode == "zombie":
        return asyncio.run(zombie(url, Path(work), name, float(lease)))
    return asyncio.run(soak(url, Path(work), name, float(lease), int(sys.argv[6])))


if __name__ == "__main__":
    sys.exit(main())
