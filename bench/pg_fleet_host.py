"""One daemon of a fleet, for bench/pg_journal.py: serves one run's command calling ``echo``.

Usage: python pg_fleet_host.py JOURNAL RUN_ID PER_CALLER CALLERS

Opens the bridge, prints ``ready``, waits for a line on stdin (so that every daemon of the
fleet starts calling at once), runs ``clients/python_client.py`` as a sandboxed command in
run RUN_ID, and prints the client's JSON report.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from toolbridge import Bridge, ToolOptions

CLIENT = Path(__file__).resolve().parent / "clients" / "python_client.py"


async def main(journal: str, run_id: str, per_caller: int, callers: int) -> None:
    async with Bridge(journal=journal) as bridge:
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        async with bridge.run(run_id) as step:
            result = await step.sandbox.commands.run(
                "agent",
                ["python3", str(CLIENT), "0", str(per_caller), str(callers)],
                tools={"echo": lambda value: value},
                tool_options=ToolOptions(max_calls=10_000_000),
                timeout=600,
            )
        if result.exit_code != 0:
            raise SystemExit(f"the client failed: {result.stderr}")
        print(result.stdout.strip(), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
