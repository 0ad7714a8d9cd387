"""A host application for crash tests, run as its own process so that it can be SIGKILLed.

Usage: python crash_host.py JOURNAL RUN_ID WORK_DIR ENTRY [--at-most-once]

It serves one tool, ``charge``, to ``WORK_DIR/agent.py`` inside ``bridge.run(RUN_ID)``. Every
invocation of the tool is appended to ``WORK_DIR/invocations.jsonl`` before the tool returns;
the agent appends every answer it receives to ``received-ENTRY.jsonl``. The environment
variable TOOLBRIDGE_FAILPOINTS decides where, if anywhere, the process kills itself.

A killed host leaves its run leased: the next host gets ``RunBusyError`` until that lease
runs out, as a real host would. It waits for the expiry the error names (the lease is short
here) and enters again, taking the run over; ``busy-ENTRY.json`` records that it had to.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from pydantic import BaseModel

from toolbridge import Bridge, RunBusyError, ToolContext, tool

RUN_LEASE = 1.0
"""Seconds a killed host's run stays leased: short, so that the next entry waits little."""

AGENT = """
import asyncio, json, os
from inngest_tools import tools, ToolError

RECEIVED = f"received-{os.environ['ENTRY']}.jsonl"


async def charge(amount, tag):
    try:
        record = {"tag": tag, "amount": amount, "value": await tools.charge(amount=amount)}
    except ToolError as error:
        record = {"tag": tag, "amount": amount, "error": error.type}
    with open(RECEIVED, "a") as received:
        received.write(json.dumps(record) + "\\n")
    if record.get("error") == "Unavailable":
        raise SystemExit(3)  # the daemon is gone


async def main():
    await charge(1, "a")
    await charge(2, "b")
    await asyncio.gather(charge(3, "c"), charge(4, "d"), charge(5, "e"))
    await asyncio.gather(charge(7, "f"), charge(7, "g"))  # the same arguments twice, in parallel
    await charge(6, "h")


asyncio.run(main())
"""


class Charge(BaseModel):
    amount: int


def main() -> None:
    journal, run_id, work_dir, entry = sys.argv[1:5]
    at_most_once = "--at-most-once" in sys.argv
    work = Path(work_dir)
    (work / "agent.py").write_text(AGENT)

    async def charge(args: Charge, ctx: ToolContext) -> dict[str, object]:
        with (work / "invocations.jsonl").open("a") as log:
            log.write(
                json.dumps(
                    {"step_key": ctx.step_key, "idempotency_key": ctx.idempotency_key, "amount": args.amount}
                )
                + "\n"
            )
        await asyncio.sleep(0.001)  # a real tool awaits something; failpoints can strike here
        return {"charged": args.amount, "receipt": ctx.idempotency_key}

    tools = {"charge": tool.step(input=Charge, run=charge, at_most_once=at_most_once)}

    async def run() -> None:
        busy: list[dict[str, object]] = []
        async with Bridge(journal=journal, run_lease=RUN_LEASE) as bridge:
            while True:
                try:
                    async with bridge.run(run_id) as step:
                        result = await step.sandbox.commands.run(
                            "agent", "python3 agent.py", tools=tools, cwd=work, env={"ENTRY": entry}
                        )
                    break
                except RunBusyError as error:
                    if len(busy) == 3:
                        raise
                    busy.append({"owner": error.owner, "expires_at": error.expires_at})
                    (work / f"busy-{entry}.json").write_text(json.dumps(busy))
                    # The dead holder's lease is the condition: nothing else would free the run.
                    await asyncio.sleep(max(0.0, error.expires_at - time.time()) + 0.05)
        (work / f"result-{entry}.json").write_text(json.dumps(asdict(result)))

    asyncio.run(run())


if __name__ == "__main__":
    main()
