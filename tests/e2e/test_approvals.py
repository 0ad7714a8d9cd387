"""Human in the loop, end to end: a real Python sandbox waits while a person decides, from
host code or from the ``toolbridge approvals`` CLI running as another process."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tests.helpers import WAIT
from toolbridge import (
    ApprovalError,
    ApprovalRequest,
    Bridge,
    CommandResult,
    RunWaiting,
    ToolOptions,
    ask_user,
    request_approval,
    tool,
)
from toolbridge._journal.sqlite import SQLiteJournal

TOOLBRIDGE = str(Path(sys.executable).with_name("toolbridge"))

AGENT = """
import asyncio, json, sys
from inngest_tools import ToolError, tools

async def attempt(call):
    try:
        return {"result": await call}
    except ToolError as error:
        return {"type": error.type, "message": error.message, "retryable": error.retryable}

async def main():
    out = {}
    for label, amount in json.loads(sys.argv[1]):
        out[label] = await attempt(tools.refund(order_id=42, amount=amount))
    print(json.dumps(out))

asyncio.run(main())
"""


class Refund(BaseModel):
    order_id: int
    amount: int


async def toolbridge(*args: str) -> tuple[int, str, str]:
    """The CLI, as a person would run it: another process on the same journal file."""
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


async def pending(bridge: Bridge, count: int = 1) -> list[ApprovalRequest]:
    """The pending requests, once there are ``count`` of them (nothing announces a new one)."""
    async with asyncio.timeout(WAIT):
        while len(found := await bridge.approvals.list()) < count:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    return found


def refund_tool(ran: list[int], **options: Any) -> object:
    def refund(args: Refund) -> dict[str, int]:
        ran.append(args.amount)
        return {"refunded": args.amount}

    return tool.step(input=Refund, run=refund, **options)


def start(
    bridge: Bridge,
    script: Callable[[str, str], Path],
    tools: Any,
    calls: list[tuple[str, int]],
    *,
    run_id: str = "hitl",
    options: ToolOptions | None = None,
    timeout: float | None = None,
) -> asyncio.Task[CommandResult]:
    path = script("agent.py", AGENT)

    async def go() -> CommandResult:
        async with bridge.run(run_id) as step:
            return await step.sandbox.commands.run(
                "agent",
                ["python3", str(path), json.dumps(calls)],
                tools=tools,
                tool_options=options,
                timeout=timeout,
                cwd=path.parent,
            )

    return asyncio.create_task(go())


def output(result: CommandResult) -> dict[str, Any]:
    assert result.exit_code == 0, result.stderr
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


async def test_a_call_waits_until_approved_from_the_cli(
    bridge: Bridge, script: Callable[[str, str], Path], journal_path: Path
) -> None:
    ran: list[int] = []
    task = start(bridge, script, {"refund": refund_tool(ran, requires_confirmation=True)}, [("big", 500)])
    (req,) = await pending(bridge)
    assert (req.kind, req.tool, req.run_id, req.arguments) == (
        "approval",
        "refund",
        "hitl",
        {"order_id": 42, "amount": 500},
    )
    assert req.summary == "refund(order_id=42, amount=500)"
    assert not task.done()
    assert ran == []

    code, listed, _ = await toolbridge("approvals", "list", "--journal", str(journal_path))
    assert code == 0
    assert req.id in listed
    assert "refund(order_id=42, amount=500)" in listed
    code, shown, err = await toolbridge(
        "approvals", "approve", req.id, "--journal", str(journal_path), "--as", "alice", "--reason", "checked"
    )
    assert code == 0, err
    assert "approved by alice via cli" in shown

    assert output(await asyncio.wait_for(task, WAIT)) == {"big": {"result": {"refunded": 500}}}
    assert ran == [500]
    (decided,) = await bridge.approvals.list(state=None)
    assert (decided.state, decided.decided_by, decided.channel, decided.reason) == (
        "approved",
        "alice",
        "cli",
        "checked",
    )


async def test_a_rejected_call_raises_approval_rejected_and_never_runs(
    bridge: Bridge, script: Callable[[str, str], Path], journal_path: Path
) -> None:
    ran: list[int] = []
    task = start(bridge, script, {"refund": refund_tool(ran, requires_confirmation=True)}, [("big", 500)])
    (req,) = await pending(bridge)
    code, _, err = await toolbridge(
        "approvals",
        "reject",
        req.id,
        "--journal",
        str(journal_path),
        "--as",
        "bob",
        "--reason",
        "not this order",
    )
    assert code == 0, err
    answer = output(await asyncio.wait_for(task, WAIT))["big"]
    assert answer["type"] == "ApprovalRejected"
    assert not answer["retryable"]
    assert "rejected by bob: not this order" in answer["message"]
    assert ran == []
    journal = SQLiteJournal(journal_path)
    await journal.open()
    try:
        (call,) = [s for s in await journal.load_steps("hitl") if s.kind == "tool"]
    finally:
        await journal.close()
    assert call.status == "failed"
    assert call.attempts == 0


async def test_a_reason_is_required_to_reject_from_the_cli(journal_path: Path, bridge: Bridge) -> None:
    code, _, err = await toolbridge("approvals", "reject", "apr_x", "--journal", str(journal_path))
    assert code == 2
    assert "--reason" in err


async def test_concurrent_approve_and_reject_exactly_one_wins(
    bridge: Bridge, script: Callable[[str, str], Path], journal_path: Path
) -> None:
    ran: list[int] = []
    task = start(bridge, script, {"refund": refund_tool(ran, requires_confirmation=True)}, [("big", 500)])
    (req,) = await pending(bridge)
    where = ("--journal", str(journal_path))
    results = await asyncio.gather(
        toolbridge("approvals", "approve", req.id, *where, "--as", "alice"),
        toolbridge("approvals", "reject", req.id, *where, "--as", "bob", "--reason", "no"),
    )
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 1]
    (_, _, loser_err) = next(r for r in results if r[0] == 1)
    final = await bridge.approvals.get(req.id)
    assert f"request {req.id} was already decided: {final.state} by {final.decided_by} via cli" in loser_err
    got = output(await asyncio.wait_for(task, WAIT))["big"]
    assert ran == ([500] if final.state == "approved" else [])
    assert ("result" in got) == (final.state == "approved")
    # A third decision, in host code, is refused the same way, and changes nothing.
    with pytest.raises(ApprovalError, match="already decided"):
        await bridge.approvals.approve(req.id, by="carol")
    assert (await bridge.approvals.get(req.id)).decided_by == final.decided_by


async def test_an_expired_request_is_its_own_state_never_a_rejection(
    bridge: Bridge, script: Callable[[str, str], Path], journal_path: Path
) -> None:
    ran: list[int] = []
    options = ToolOptions(approval_timeout=0.5)
    task = start(
        bridge,
        script,
        {"refund": refund_tool(ran, requires_confirmation=True)},
        [("big", 500)],
        options=options,
    )
    answer = output(await asyncio.wait_for(task, WAIT))["big"]
    assert answer["type"] == "ApprovalExpired"
    assert not answer["retryable"]
    assert ran == []
    (req,) = await bridge.approvals.list(state=None)
    assert (req.state, req.channel, req.decided_by) == ("expired", "timeout", None)
    code, _, err = await toolbridge("approvals", "approve", req.id, "--journal", str(journal_path))
    assert code == 1
    assert "expired" in err
    assert "rejected" not in err


async def test_a_confirmation_callable_decides_per_argument_and_fails_closed(
    bridge: Bridge, script: Callable[[str, str], Path]
) -> None:
    ran: list[int] = []
    asked: list[int] = []

    def needs_person(args: Refund, ctx: Any) -> bool:
        asked.append(args.amount)
        if args.amount == 13:
            raise RuntimeError("the risk service is down")
        assert ctx.tool_name == "refund"
        assert ctx.run_id == "hitl"
        return args.amount > 100

    refund = refund_tool(ran, requires_confirmation=needs_person)
    task = start(bridge, script, {"refund": refund}, [("small", 5), ("big", 500), ("broken", 13)])
    (big,) = await pending(bridge)
    assert big.arguments["amount"] == 500
    assert ran == [5]
    await bridge.approvals.approve(big.id, by="alice")
    (broken,) = await pending(bridge)  # the check raised: a person decides (fail closed)
    assert broken.arguments["amount"] == 13
    assert ran == [5, 500]
    await bridge.approvals.approve(broken.id, by="alice")
    out = output(await asyncio.wait_for(task, WAIT))
    assert {label: value["result"]["refunded"] for label, value in out.items()} == {
        "small": 5,
        "big": 500,
        "broken": 13,
    }
    assert asked == [5, 500, 13]

    # Replay: every answer from the journal, and the callable is not asked again.
    replay = start(bridge, script, {"refund": refund}, [("small", 5), ("big", 500), ("broken", 13)])
    assert output(await asyncio.wait_for(replay, WAIT)) == out
    assert asked == [5, 500, 13]
    assert ran == [5, 500, 13]


async def test_ask_user_and_request_approval_from_the_sandbox(
    bridge: Bridge, script: Callable[[str, str], Path], journal_path: Path
) -> None:
    class Account(BaseModel):
        account: str
        confirm: bool

    path = script(
        "ask.py",
        """
        import asyncio, json
        from inngest_tools import tools

        async def main():
            answer = await tools.ask_user(question="Which account?")
            account = await tools.which(question="Refund to which account?")
            decision = await tools.request_approval(action="refund order 42", details={"amount": 5})
            print(json.dumps({"answer": answer, "account": account, "decision": decision}))

        asyncio.run(main())
        """,
    )
    tools = [ask_user(), ask_user(name="which", answer=Account), request_approval()]

    async def go() -> CommandResult:
        async with bridge.run("ask") as step:
            return await step.sandbox.commands.run(
                "ask", ["python3", str(path)], tools=tools, cwd=path.parent
            )

    task = asyncio.create_task(go())
    where = ("--journal", str(journal_path), "--as", "dana")
    (question,) = await pending(bridge)
    assert (question.kind, question.summary) == ("input", "Which account?")
    code, _, err = await toolbridge("approvals", "answer", question.id, "savings", *where)
    assert code == 0, err

    (typed,) = await pending(bridge)
    code, _, err = await toolbridge("approvals", "answer", typed.id, '{"account": "savings"}', *where)
    assert code == 1
    assert "confirm" in err
    with pytest.raises(ApprovalError, match="asks a question"):
        await bridge.approvals.approve(typed.id, by="dana")
    await bridge.approvals.answer(typed.id, {"account": "savings", "confirm": True}, by="dana")

    (approval,) = await pending(bridge)
    assert (approval.kind, approval.summary) == ("approval", "refund order 42")
    assert approval.arguments == {"action": "refund order 42", "details": {"amount": 5}}
    await bridge.approvals.reject(approval.id, by="erin", reason="too late in the day")

    out = output(await asyncio.wait_for(task, WAIT))
    assert out == {
        "answer": "savings",
        "account": {"account": "savings", "confirm": True},
        "decision": {"approved": False, "by": "erin", "reason": "too late in the day"},
    }


async def test_after_the_hold_the_run_waits_and_resumes_when_entered_again(
    bridge: Bridge, script: Callable[[str, str], Path], journal_path: Path
) -> None:
    ran: list[int] = []
    refund = refund_tool(ran, requires_confirmation=lambda args, ctx: args.amount > 100)
    options = ToolOptions(approval_hold=0.5)
    path = script(
        "parallel.py",
        """
        import asyncio, json
        from inngest_tools import tools

        async def main():
            answers = await asyncio.gather(*(tools.refund(order_id=42, amount=n) for n in (1, 500, 2)))
            print(json.dumps(answers))

        asyncio.run(main())
        """,
    )

    async def enter() -> CommandResult:
        async with bridge.run("held") as step:
            return await step.sandbox.commands.run(
                "agent",
                ["python3", str(path)],
                tools={"refund": refund},
                tool_options=options,
                cwd=path.parent,
            )

    with pytest.raises(RunWaiting) as waiting:
        await asyncio.wait_for(enter(), WAIT)
    (req,) = waiting.value.requests
    assert waiting.value.run_id == "held"
    assert req.arguments["amount"] == 500
    assert sorted(ran) == [1, 2]
    code, runs, _ = await toolbridge("runs", "--journal", str(journal_path), "--json")
    assert code == 0
    assert {r["run_id"]: r["status"] for r in json.loads(runs)} == {"held": "waiting"}

    code, _, err = await toolbridge(
        "approvals", "approve", req.id, "--journal", str(journal_path), "--as", "alice"
    )
    assert code == 0, err
    result = await asyncio.wait_for(enter(), WAIT)
    assert json.loads(result.stdout) == [{"refunded": 1}, {"refunded": 500}, {"refunded": 2}]
    assert sorted(ran) == [1, 2, 500]  # the completed calls came from the journal; 500 ran once

    code, trace, _ = await toolbridge("trace", "held", "--journal", str(journal_path), "--json")
    assert code == 0
    tree = json.loads(trace)
    assert tree["status"] == "completed"
    (command,) = tree["tree"]
    (shown,) = [call["approvals"] for call in command["children"] if call["approvals"]]
    assert shown == [
        {
            "id": req.id,
            "kind": "approval",
            "state": "approved",
            "by": "alice",
            "via": "cli",
            "asked_at": shown[0]["asked_at"],
            "decided_at": shown[0]["decided_at"],
            "reason": None,
            "summary": "refund(order_id=42, amount=500)",
        }
    ]
    code, text, _ = await toolbridge("trace", "held", "--journal", str(journal_path))
    assert "approved by alice via cli" in text


async def test_the_wait_does_not_count_against_the_command_timeout(
    bridge: Bridge, script: Callable[[str, str], Path]
) -> None:
    ran: list[int] = []
    task = start(
        bridge, script, {"refund": refund_tool(ran, requires_confirmation=True)}, [("big", 500)], timeout=3.0
    )
    (req,) = await pending(bridge)
    await asyncio.sleep(3.5)  # longer than the command may run: the clock stands still meanwhile
    assert not task.done()
    await bridge.approvals.approve(req.id, by="alice")
    result = await asyncio.wait_for(task, WAIT)
    assert result.stopped is None
    assert output(result) == {"big": {"result": {"refunded": 500}}}


async def test_toolbridge_call_waits_says_how_to_decide_and_returns_once_approved(tmp_path: Path) -> None:
    app = tmp_path / "shop_app.py"
    app.write_text(
        "from toolbridge import Bridge, tool\n"
        "bridge = Bridge(journal='shop.db', tools={'delete_order': tool.step(\n"
        "    run=lambda args: {'deleted': args['order_id']}, requires_confirmation=True)})\n"
    )
    call = await asyncio.create_subprocess_exec(
        TOOLBRIDGE,
        "call",
        "shop_app:bridge",
        "delete_order",
        "--input",
        '{"order_id": 42}',
        "--run-id",
        "del",
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert call.stderr is not None
    hint = (await asyncio.wait_for(call.stderr.readline(), WAIT)).decode()
    assert "delete_order(order_id=42) waits for a person: toolbridge approvals approve apr_" in hint
    command = hint.split("waits for a person: ")[1].split()
    code, _, err = await toolbridge(*command[1:], "--as", "alice")
    assert code == 0, err
    stdout, _ = await asyncio.wait_for(call.communicate(), WAIT)
    assert call.returncode == 0
    assert json.loads(stdout) == {"deleted": 42}
