"""A host that enters one run when told to, for tests of who owns a run. Run as its own process.

Usage: python owner_host.py JOURNAL RUN_ID WORK_DIR RUN_LEASE [--wait=SECONDS]

It prints one JSON line per event on stdout and takes its cues from stdin, so that a test can
line up two hosts exactly: ``ready`` (the bridge is open), then on the line ``go`` it enters
the run and calls the at-most-once tool ``charge`` for step ``a`` (``holding``), then on the
next line it calls ``charge`` for step ``b``, leaves the run and exits (``done``). Entering
waits for a live holder as ``bridge.run(wait=)`` does (``--wait`` seconds, or its default);
when the run is still busy it prints ``busy`` with the holder and exits.

Every real execution of ``charge`` is appended to ``WORK_DIR/invocations.jsonl`` with its pid.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from pydantic import BaseModel

from toolbridge import Bridge, RunBusyError, tool


class Charge(BaseModel):
    step: str


def say(event: str, **fields: object) -> None:
    print(json.dumps({"event": event, "pid": os.getpid(), **fields}), flush=True)


async def cue() -> str:
    line: str = await asyncio.to_thread(sys.stdin.readline)
    return line.strip()


def main() -> None:
    journal, run_id, work_dir, lease = sys.argv[1:5]
    waits = [float(arg.removeprefix("--wait=")) for arg in sys.argv if arg.startswith("--wait=")]
    wait = waits[0] if waits else None
    invocations = Path(work_dir) / "invocations.jsonl"

    def charge(args: Charge) -> dict[str, object]:
        with invocations.open("a") as log:
            log.write(json.dumps({"step": args.step, "pid": os.getpid()}) + "\n")
        return {"charged": args.step, "by": os.getpid()}

    tools = {"charge": tool.step(input=Charge, run=charge, at_most_once=True)}

    async def run() -> None:
        async with Bridge(journal=journal, tools=tools, run_lease=float(lease)) as bridge:
            say("ready")
            assert await cue() == "go"
            try:
                async with bridge.run(run_id, wait=wait):
                    first = await bridge.call_tool("charge", {"step": "a"}, run_id=run_id)
                    say("holding", a=first)
                    await cue()
                    second = await bridge.call_tool("charge", {"step": "b"}, run_id=run_id)
                say("done", b=second)
            except RunBusyError as busy:
                say("busy", owner=busy.owner, expires_at=busy.expires_at, message=str(busy))

    asyncio.run(run())


if __name__ == "__main__":
    main()
