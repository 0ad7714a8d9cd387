"""A pending-then-approved call: from a person's decision to the sandbox's ``await`` returning.

A real sandboxed Python command calls ``refund`` (``requires_confirmation=True``) again and
again; each call waits until the bench approves it, either in the host's own process
(``bridge.approvals.approve``: the waiting call is woken at once) or through the
``toolbridge approvals approve`` CLI in another process (seen by the host's journal poll,
``POLL_INTERVAL``). The sandbox stamps the moment each ``await`` returns. The baseline,
measured in the same run by the same command: a call to a tool that needs no confirmation,
from the ``await`` to its return.

Usage: python bench/approval_latency.py [--calls 20] [--cli-calls 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from toolbridge import Bridge, tool
from toolbridge._calls.hub import POLL_INTERVAL

TOOLBRIDGE = str(Path(sys.executable).with_name("toolbridge"))

AGENT = """
import asyncio, json, sys, time
from inngest_tools import tools

async def main():
    plain, approved = [], []
    for n in range(int(sys.argv[1])):
        started = time.time()
        await tools.plain(n=n)
        plain.append(time.time() - started)
        await tools.refund(n=n)
        approved.append(time.time())  # when the await returned
    print(json.dumps({"plain": plain, "approved": approved}))

asyncio.run(main())
"""


async def _decide_in_process(bridge: Bridge, calls: int) -> list[float]:
    decided: list[float] = []
    while len(decided) < calls:
        for req in await bridge.approvals.list():
            decided.append(time.time())
            await bridge.approvals.approve(req.id, by="bench")
        await asyncio.sleep(0.001)
    return decided


async def _decide_from_cli(bridge: Bridge, journal: Path, calls: int) -> list[float]:
    decided: list[float] = []
    while len(decided) < calls:
        for req in await bridge.approvals.list():
            process = await asyncio.create_subprocess_exec(
                TOOLBRIDGE,
                "approvals",
                "approve",
                req.id,
                "--journal",
                str(journal),
                "--json",
                stdout=asyncio.subprocess.PIPE,
            )
            stdout, _ = await process.communicate()
            decided.append(json.loads(stdout)["decided_at"])  # stamped by the CLI, before its commit
        await asyncio.sleep(0.001)
    return decided


async def measure(calls: int, *, cli: bool) -> tuple[list[float], list[float]]:
    """(decision -> await returned, baseline call) in seconds, one per call."""
    work = Path(tempfile.mkdtemp())
    (work / "agent.py").write_text(AGENT)
    journal = work / "bench.db"
    tools = {
        "plain": tool.step(run=lambda args: args),
        "refund": tool.step(run=lambda args: args, requires_confirmation=True),
    }
    async with Bridge(journal=journal) as bridge:
        deciding = asyncio.create_task(
            _decide_from_cli(bridge, journal, calls) if cli else _decide_in_process(bridge, calls)
        )
        async with bridge.run("bench") as step:
            result = await step.sandbox.commands.run(
                "agent", ["python3", "agent.py", str(calls)], tools=tools, cwd=work
            )
        decided = await deciding
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    return [returned - at for returned, at in zip(out["approved"], decided, strict=True)], out["plain"]


def _ms(values: list[float]) -> str:
    p90 = sorted(values)[int(len(values) * 0.9)]
    return f"{statistics.median(values) * 1000:7.2f} ms (p90 {p90 * 1000:.2f})"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--cli-calls", type=int, default=8)
    args = parser.parse_args()
    in_process, baseline = await measure(args.calls, cli=False)
    from_cli, baseline_cli = await measure(args.cli_calls, cli=True)
    print(f"decision -> sandbox await returns, medians (journal poll every {POLL_INTERVAL * 1000:.0f} ms):")
    print(f"  approved in-process (bridge.approvals)  {_ms(in_process)}   n={len(in_process)}")
    print(f"  approved from the CLI (other process)   {_ms(from_cli)}   n={len(from_cli)}")
    print(f"  baseline: a call needing no approval    {_ms(baseline + baseline_cli)}")


if __name__ == "__main__":
    asyncio.run(main())
