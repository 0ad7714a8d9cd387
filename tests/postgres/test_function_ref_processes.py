"""``function_ref`` across processes: daemon B is a process of its own on the shared journal.

B (``refund_daemon.py``) declares ``refund``; the test's bridge A only names it. A sandboxed
call on A gets B's result; after B's clean shutdown (SIGTERM) the call fails at once with
``FunctionNotFound``; when B is killed while it runs the call, A stops waiting once B's
registration has expired (one ``run_lease``), with the same clear error, unless another
daemon serving it takes the dead one's run over and finishes it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from toolbridge import Bridge, FunctionContext, ToolOptions, function_ref
from toolbridge._journal.base import open_journal

DAEMON = Path(__file__).with_name("refund_daemon.py")
REPO = Path(__file__).resolve().parents[2]
CALL = """
try:
    return await tools.refund(order_id="o1", amount=5)
except ToolError as error:
    return {"error": error.type, "message": error.message}
"""


class Daemon:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def event(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), 30)
        assert line, "the daemon exited"
        report: dict[str, Any] = json.loads(line)
        return report


@asynccontextmanager
async def daemon_b(journal_url: str, mode: str, lease: str = "30s") -> AsyncIterator[Daemon]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(DAEMON), journal_url, mode, lease, stdout=asyncio.subprocess.PIPE, cwd=REPO
    )
    daemon = Daemon(process)
    try:
        assert (await daemon.event())["event"] == "ready"
        yield daemon
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def call(a: Bridge, run_id: str) -> Any:
    async with a.run(run_id) as step:
        return await step.sandbox.python(
            "agent",
            CALL,
            tools={"refund": function_ref("refund")},
            tool_options=ToolOptions(tool_timeout="60s"),
        )


async def test_a_call_on_a_gets_the_result_of_b_and_fails_clearly_once_b_shut_down(journal_url: str) -> None:
    async with Bridge(journal=journal_url) as a:
        async with daemon_b(journal_url, "serve") as b:
            served = await call(a, "served")
            assert (await b.event())["event"] == "started"
            b.process.send_signal(signal.SIGTERM)
            assert (await b.event())["event"] == "closed"
        assert served["refunded"] == "o1"
        assert served["pid"] not in (None, os.getpid())  # B's process ran it
        unserved = await call(a, "unserved")
    assert unserved["error"] == "FunctionNotFound"
    assert "no daemon of this journal serves function 'refund'" in unserved["message"]


async def test_a_waiting_call_fails_clearly_when_b_dies_under_it(journal_url: str) -> None:
    async with Bridge(journal=journal_url) as a, daemon_b(journal_url, "hang", lease="1s") as b:
        waiting = asyncio.ensure_future(call(a, "orphaned"))
        assert (await b.event())["event"] == "started"
        b.process.kill()  # no clean shutdown: its registration expires with its lease
        result = await asyncio.wait_for(waiting, 30)
    assert result["error"] == "FunctionNotFound"
    assert "no daemon of this journal serves function 'refund'" in result["message"]


async def test_another_daemon_serving_the_function_takes_over_the_run_of_one_that_died(
    journal_url: str,
) -> None:
    ran: list[str] = []
    b2 = Bridge(journal=journal_url, run_lease="1s")

    @b2.function(id="refund")
    async def refund(ctx: FunctionContext) -> dict[str, Any]:
        ran.append(ctx.run_id)
        return {"refunded": ctx.event.data["order_id"], "pid": os.getpid()}

    async with Bridge(journal=journal_url) as a:
        async with daemon_b(journal_url, "hang", lease="1s") as b1:
            waiting = asyncio.ensure_future(call(a, "taken-over"))
            started = await b1.event()  # B1 claimed the invocation: it holds its run
            b1.process.kill()
        async with b2:  # serves refund too: once B1's lease runs out, the run is its own
            result = await asyncio.wait_for(waiting, 30)
    reader = open_journal(journal_url)
    await reader.open()
    try:
        run = await reader.get_run(ran[0])
    finally:
        await reader.close()
    assert started["event"] == "started"
    assert result == {"refunded": "o1", "pid": os.getpid()}
    assert len(ran) == 1
    assert ran[0].startswith("refund/inv_")
    assert run is not None
    assert (run.status, run.fence) == ("completed", 2)  # B1's fence, then B2's
