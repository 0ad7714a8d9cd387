"""A host whose sandbox waits on a person, run as its own process so that it can be SIGKILLed.

Usage: python approval_host.py JOURNAL RUN_ID WORK_DIR ENTRY [--at-most-once]

It serves ``charge`` (no confirmation) and ``wire`` (``requires_confirmation=True``) to
``WORK_DIR/agent.py``, which calls them in parallel. Every invocation of a tool is appended to
``WORK_DIR/invocations.jsonl``; the agent writes the answers it received to
``received-ENTRY.json``, and the host its outcome to ``outcome-ENTRY.json``. A killed host
leaves its run leased: the next entry waits for that lease to run out (see crash_host.py).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from pydantic import BaseModel

from toolbridge import Bridge, RunBusyError, RunWaiting, ToolContext, tool

RUN_LEASE = 1.0
"""Seconds a killed host's run stays leased: short, so that the next entry waits little."""

AGENT = """
import asyncio, json, os
from inngest_tools import tools, ToolError

async def call(name, amount):
    try:
        return {"value": await getattr(tools, name)(amount=amount)}
    except ToolError as error:
        return {"error": error.type}

async def main():
    answers = await asyncio.gather(call("charge", 1), call("wire", 500), call("charge", 2))
    with open(f"received-{os.environ['ENTRY']}.json", "w") as received:
        json.dump(answers, received)

asyncio.run(main())
"""


class Amount(BaseModel):
    amount: int


def main() -> None:
    journal, run_id, work_dir, entry = sys.argv[1:5]
    at_most_once = "--at-most-once" in sys.argv
    work = Path(work_dir)
    (work / "agent.py").write_text(AGENT)

    def recorder(name: str):  # type: ignore[no-untyped-def]
        def run(args: Amount, ctx: ToolContext) -> dict[str, object]:
            with (work / "invocations.jsonl").open("a") as log:
                log.write(json.dumps({"tool": name, "amount": args.amount, "step_key": ctx.step_key}) + "\n")
            return {name: args.amount, "receipt": ctx.idempotency_key}

        return run

    tools = {
        "charge": tool.step(input=Amount, run=recorder("charge")),
        "wire": tool.step(
            input=Amount, run=recorder("wire"), requires_confirmation=True, at_most_once=at_most_once
        ),
    }

    async def run() -> None:
        async with Bridge(journal=journal, run_lease=RUN_LEASE) as bridge:
            for _ in range(3):
                try:
                    async with bridge.run(run_id) as step:
                        result = await step.sandbox.commands.run(
                            "agent", "python3 agent.py", tools=tools, cwd=work, env={"ENTRY": entry}
                        )
                    outcome: dict[str, object] = {"exit_code": result.exit_code, "stderr": result.stderr}
                    break
                except RunWaiting as waiting:
                    outcome = {"waiting": [req.id for req in waiting.requests]}
                    break
                except RunBusyError as error:  # the killed host's lease is the condition
                    await asyncio.sleep(max(0.0, error.expires_at - time.time()) + 0.05)
        (work / f"outcome-{entry}.json").write_text(json.dumps(outcome))

    asyncio.run(run())


if __name__ == "__main__":
    main()
