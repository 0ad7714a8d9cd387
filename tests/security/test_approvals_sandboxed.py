"""A sandbox cannot decide the requests its own calls wait on: no RPC decides, its token
grants only its tools, and under bubblewrap it cannot reach the journal that the CLI writes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from toolbridge import Bridge, tool

WAIT = 60.0

# Waits on `wire`, and meanwhile tries every way it has to approve the request itself.
SELF_APPROVER = """
import asyncio, json, os, sqlite3, subprocess, sys
import grpc
from inngest_tools import tools, ToolError

JOURNAL = sys.argv[1]

async def attempt(label, call, out):
    try:
        out[label] = {"result": await call}
    except ToolError as error:
        out[label] = {"error": error.type}

async def main():
    out = {}
    wire = asyncio.ensure_future(tools.wire(amount=500))
    await tools.requested()  # returns once the host holds the request
    for name in ("approve", "approvals", "approvals_approve", "decide"):
        await attempt(name, tools[name]("apr_any", by="sandbox"), out)
    # The CLI's own path, with the journal the host uses.
    try:
        db = sqlite3.connect(JOURNAL)
        changed = db.execute("UPDATE approvals SET state = 'approved', decided_by = 'sandbox'").rowcount
        db.commit()
        out["journal"] = {"changed": changed}
    except sqlite3.Error as error:
        out["journal"] = {"error": type(error).__name__}
    # An RPC the service might have had for deciding.
    channel = grpc.aio.insecure_channel(os.environ["TOOLBRIDGE_ADDRESS"])
    approve = channel.unary_unary("/toolbridge.v1.ToolBridgeService/Approve")
    try:
        await approve(b"", metadata=(("x-toolbridge-token", os.environ["TOOLBRIDGE_TOKEN"]),))
        out["rpc"] = {"result": "answered"}
    except grpc.RpcError as error:
        out["rpc"] = {"error": error.code().name}
    await tools.tried(out)
    print(json.dumps({"wire": await wire}), flush=True)

asyncio.run(main())
"""


async def _self_approve(
    bridge: Bridge, work_dir: Path, write_script: Callable[[str, str], Path], journal: Path
) -> tuple[dict[str, object], dict[str, object], list[int]]:
    """Run the self-approver; returns what it tried, what its call got, and the tool's runs."""
    script = write_script("self_approver.py", SELF_APPROVER)
    ran: list[int] = []
    tried: dict[str, object] = {}
    done_trying = asyncio.Event()

    def report(out: dict[str, object]) -> None:
        tried.update(out)
        done_trying.set()

    async def requested() -> None:
        async with asyncio.timeout(WAIT):
            while not await bridge.approvals.list():  # noqa: ASYNC110 - nothing announces it
                await asyncio.sleep(0.01)

    def wire(args: dict[str, int]) -> dict[str, int]:
        ran.append(args["amount"])
        return {"wired": args["amount"]}

    async def go() -> object:
        async with bridge.run("self") as step:
            return await step.sandbox.commands.run(
                "agent",
                ["python3", str(script), str(journal)],
                tools={
                    "wire": tool.step(run=wire, requires_confirmation=True),
                    "tried": report,
                    "requested": requested,
                },
                cwd=work_dir,
            )

    task = asyncio.create_task(go())
    await asyncio.wait_for(done_trying.wait(), WAIT)
    (req,) = await bridge.approvals.list(state=None)
    if req.state == "pending":
        assert ran == []
        await bridge.approvals.approve(req.id, by="alice")
    result = await asyncio.wait_for(task, WAIT)
    return tried, json.loads(result.stdout), ran  # type: ignore[attr-defined]


async def test_a_sandbox_cannot_approve_its_own_request(
    sandboxed: Bridge, work_dir: Path, write_script: Callable[[str, str], Path], journal_path: Path
) -> None:
    tried, answered, ran = await _self_approve(sandboxed, work_dir, write_script, journal_path)
    assert {name: tried[name] for name in ("approve", "approvals", "approvals_approve", "decide")} == {
        name: {"error": "ToolNotFound"} for name in ("approve", "approvals", "approvals_approve", "decide")
    }
    assert tried["journal"] == {"error": "OperationalError"}  # the journal is not in the sandbox
    assert tried["rpc"] == {"error": "UNIMPLEMENTED"}
    assert answered == {"wire": {"wired": 500}}
    assert ran == [500]
    (decided,) = await sandboxed.approvals.list(state=None)
    assert (decided.decided_by, decided.channel) == ("alice", "api")  # the person, not the sandbox


async def test_control_without_bubblewrap_the_journal_is_within_reach(
    unsandboxed: Bridge, work_dir: Path, write_script: Callable[[str, str], Path], tmp_path: Path
) -> None:
    """The plain process launcher is no boundary (as documented): the same probe reaches the
    journal file, which shows the probe is real. The RPC and the tool names stay refused."""
    tried, answered, _ = await _self_approve(unsandboxed, work_dir, write_script, tmp_path / "control.db")
    assert tried["journal"] == {"changed": 1}
    assert tried["rpc"] == {"error": "UNIMPLEMENTED"}
    assert tried["approve"] == {"error": "ToolNotFound"}
    assert answered == {"wire": {"wired": 500}}
