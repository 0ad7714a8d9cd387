"""A real `node` sandbox waits on a person inside `Promise.all`; the CLI decides from another
process; the run stopped after its hold resumes with every call answered once."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import WAIT
from toolbridge import Bridge, CommandResult, RunWaiting, ToolOptions, ask_user, tool

TOOLBRIDGE = str(Path(sys.executable).with_name("toolbridge"))

AGENT = """
const { tools, ToolError } = require("inngest_tools");

async function settle(call) {
  try {
    return { value: await call };
  } catch (error) {
    if (!(error instanceof ToolError)) throw error;
    return { error: error.type, message: error.message };
  }
}

(async () => {
  const answers = await Promise.all([
    settle(tools.refund({ amount: 1 })),
    settle(tools.refund({ amount: 500 })),
    settle(tools.refund({ amount: 2 })),
    settle(tools.refund({ amount: 700 })),
  ]);
  const where = await tools.ask_user({ question: "Where to?" });
  console.log(JSON.stringify({ answers, where }));
})();
"""


async def approve(journal: Path, *args: str) -> None:
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE,
        "approvals",
        *args,
        "--journal",
        str(journal),
        "--as",
        "alice",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 0, stderr.decode()


# The process launcher only: under bubblewrap the rejected call is still listed as waiting when
# the hold ends (with the client from before issue 34 too), which is the daemon's to look into.
async def test_node_promise_all_with_calls_that_wait_and_a_resume(
    bridge: Bridge, script: Callable[[str, str], Path], journal_path: Path
) -> None:
    ran: list[int] = []

    def refund(args: dict[str, int]) -> dict[str, int]:
        ran.append(args["amount"])
        return {"refunded": args["amount"]}

    tools = [
        tool.step(name="refund", run=refund, requires_confirmation=lambda args, ctx: args["amount"] > 100),
        ask_user(),
    ]
    path = script("agent.js", AGENT)

    async def enter(hold: float = 600.0) -> CommandResult:
        options = ToolOptions(approval_hold=hold)
        async with bridge.run("node-hitl") as step:
            return await step.sandbox.commands.run(
                "agent", ["node", str(path)], tools=tools, tool_options=options, cwd=path.parent
            )

    # First entry: decide one of the two waiting calls, let the other outlast the hold.
    task = asyncio.create_task(enter(hold=1.0))
    async with asyncio.timeout(WAIT):
        while len(found := await bridge.approvals.list()) < 2:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    by_amount = {req.arguments["amount"]: req for req in found}
    await bridge.approvals.reject(by_amount[700].id, by="alice", reason="too much")  # well within the hold
    with pytest.raises(RunWaiting) as waiting:
        await asyncio.wait_for(task, WAIT)
    assert [req.id for req in waiting.value.requests] == [by_amount[500].id]
    assert sorted(ran) == [1, 2]

    # Decided while no command runs; the second entry replays and runs the approved call once.
    await approve(journal_path, "approve", by_amount[500].id)
    task = asyncio.create_task(enter())
    async with asyncio.timeout(WAIT):
        while not (questions := await bridge.approvals.list()):  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    await approve(journal_path, "answer", questions[0].id, "home")
    result = await asyncio.wait_for(task, WAIT)
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["answers"][:3] == [{"value": {"refunded": n}} for n in (1, 500, 2)]
    assert out["answers"][3]["error"] == "ApprovalRejected"
    assert "rejected by alice: too much" in out["answers"][3]["message"]
    assert out["where"] == "home"
    assert sorted(ran) == [1, 2, 500]
