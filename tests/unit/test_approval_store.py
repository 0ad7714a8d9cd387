"""Requests and decisions on a real SQLite file (and the in-memory store), the pausable
command clock, and the tool shapes of human in the loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from toolbridge import ApprovalError, ToolOptions, ask_user, request_approval, tool, tool_definitions
from toolbridge._calls.decisions import Approvals
from toolbridge._calls.hub import ApprovalHub
from toolbridge._journal.approvals import ApprovalRequest
from toolbridge._journal.null import NullJournal
from toolbridge._journal.sqlite import SQLiteJournal
from toolbridge._records import now
from toolbridge._sandbox.launcher import StopSignal
from toolbridge._tools.convert import to_tools


def request(
    run_id: str = "r", *, kind: Any = "approval", ttl: float = 60.0, **fields: Any
) -> ApprovalRequest:
    stamp = now()
    values: dict[str, Any] = {
        "id": f"apr_{run_id}_{kind}",
        "run_id": run_id,
        "step_key": "agent/refund@abc",
        "args_hash": "h1",
        "kind": kind,
        "tool": "refund",
        "arguments": {"amount": 5},
        "summary": "refund(amount=5)",
        "state": "pending",
        "created_at": stamp,
        "expires_at": stamp + ttl,
        **fields,
    }
    return ApprovalRequest(**values)


@pytest.fixture(params=["sqlite", "memory"])
async def hub(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ApprovalHub]:
    journal: SQLiteJournal | NullJournal = (
        SQLiteJournal(tmp_path / "j.db") if request.param == "sqlite" else NullJournal()
    )
    await journal.open()
    try:
        yield ApprovalHub(journal)
    finally:
        await journal.close()


async def test_a_request_is_kept_once_per_call_and_found_by_its_step(hub: ApprovalHub) -> None:
    first = await hub.store.create(request())
    again = await hub.store.create(request(id="apr_other"))  # the same call asks again (replay)
    assert again == first
    other_args = await hub.store.create(request(id="apr_new_args", args_hash="h2"))
    assert other_args.id == "apr_new_args"
    assert [r.id for r in await hub.store.for_step("r", "agent/refund@abc")] == [first.id, "apr_new_args"]
    assert await hub.store.get(first.id) == first


async def test_the_second_decision_says_how_who_and_when_it_was_decided(hub: ApprovalHub) -> None:
    req = await hub.store.create(request())
    api = Approvals(hub, channel="api")
    decided = await api.approve(req.id, by="alice", reason="fine")
    assert (decided.state, decided.decided_by, decided.channel, decided.reason) == (
        "approved",
        "alice",
        "api",
        "fine",
    )
    with pytest.raises(
        ApprovalError, match=r"already decided: approved by alice via api at .* \(fine\)"
    ) as error:
        await Approvals(hub, channel="cli").reject(req.id, by="bob", reason="no")
    assert error.value.request.decided_by == "alice"
    assert (await api.get(req.id)).state == "approved"


async def test_refusals_name_the_problem(hub: ApprovalHub) -> None:
    api = Approvals(hub, channel="api")
    with pytest.raises(ApprovalError, match="no request 'apr_nope'"):
        await api.approve("apr_nope", by="alice")
    req = await hub.store.create(request())
    with pytest.raises(ApprovalError, match="say who decides"):
        await api.approve(req.id, by=" ")
    with pytest.raises(ApprovalError, match="asks for approval"):
        await api.answer(req.id, "yes", by="alice")
    question = await hub.store.create(
        request("q", kind="input", answer_schema={"type": "integer"}, step_key="agent/ask")
    )
    with pytest.raises(ApprovalError, match="invalid answer"):
        await api.answer(question.id, "many", by="alice")
    assert (await api.get(question.id)).state == "pending"  # a bad answer changes nothing
    answered = await api.answer(question.id, 3, by="alice")
    assert (answered.state, answered.answer) == ("approved", 3)
    with pytest.raises(ApprovalError, match="already decided: answered by alice"):
        await api.answer(question.id, 4, by="bob")


async def test_a_late_decision_finds_the_request_expired_not_rejected(hub: ApprovalHub) -> None:
    req = await hub.store.create(request(ttl=-1.0))
    api = Approvals(hub, channel="cli")
    with pytest.raises(ApprovalError, match=f"request {req.id} expired at"):
        await api.approve(req.id, by="alice")
    current = await api.get(req.id)
    assert (current.state, current.channel, current.decided_by) == ("expired", "timeout", None)
    assert await api.list() == []
    assert [r.state for r in await api.list(state=None)] == ["expired"]


async def test_two_processes_deciding_at_once_one_wins(tmp_path: Path) -> None:
    """Two journals on one file (as two processes have): the compare-and-swap lets one win."""
    journals = [SQLiteJournal(tmp_path / "j.db"), SQLiteJournal(tmp_path / "j.db")]
    for journal in journals:
        await journal.open()
    try:
        req = await journals[0].approvals.create(request())
        outcomes = await asyncio.gather(
            Approvals(ApprovalHub(journals[0]), channel="cli").approve(req.id, by="alice"),
            Approvals(ApprovalHub(journals[1]), channel="cli").reject(req.id, by="bob", reason="no"),
            return_exceptions=True,
        )
    finally:
        for journal in journals:
            await journal.close()
    won = [o for o in outcomes if isinstance(o, ApprovalRequest)]
    lost = [o for o in outcomes if isinstance(o, ApprovalError)]
    assert len(won) == 1
    assert len(lost) == 1
    assert f"already decided: {won[0].state} by {won[0].decided_by}" in str(lost[0])


async def test_a_waiter_wakes_at_once_for_a_decision_in_this_process(hub: ApprovalHub) -> None:
    req = await hub.store.create(request())
    waiting = asyncio.create_task(hub.wait(req, timeout=30))
    await asyncio.sleep(0)  # let it start waiting
    decided = await Approvals(hub, channel="api").approve(req.id, by="alice")
    assert await asyncio.wait_for(waiting, 5) == decided
    assert await hub.wait(await hub.store.create(request("other")), timeout=0.01) is None


async def test_the_command_clock_stands_still_while_a_hold_is_taken() -> None:
    stop = StopSignal()
    stop.pause()
    clock = asyncio.create_task(stop.elapse(0.02))
    await asyncio.sleep(0.1)  # five times the budget passes, all of it on hold
    assert not clock.done()
    stop.resume()
    await asyncio.wait_for(clock, 5)
    assert stop.holds == 0


class Refund(BaseModel):
    order_id: int


def test_named_tools_in_a_list_and_their_schema() -> None:
    lookup = tool.step(name="lookup_order", description="Find an order", input=Refund, run=lambda a: a)
    refund = tool.step(name="refund", run=lambda a: a, requires_confirmation=lambda args, ctx: True)
    assert lookup.schema() == {
        "name": "lookup_order",
        "description": "Find an order",
        "input_schema": lookup.input_schema.json_schema,  # type: ignore[union-attr]
        "requires_confirmation": False,
    }
    assert refund.schema()["requires_confirmation"] is True
    tools = to_tools([lookup, refund, ask_user(), request_approval()])
    assert sorted(tools) == ["ask_user", "lookup_order", "refund", "request_approval"]
    assert [d["name"] for d in tool_definitions([lookup, ask_user()])] == ["ask_user", "lookup_order"]
    with pytest.raises(TypeError, match="has no name"):
        to_tools([tool.step(run=lambda a: a)])
    with pytest.raises(ValueError, match="two tools in tools= are named 'refund'"):
        to_tools([refund, refund])
    with pytest.raises(ValueError, match="invalid tool name"):
        tool.step(name="not a name", run=lambda a: a)
    with pytest.raises(TypeError, match="requires_confirmation= must be True, False or a function"):
        tool.step(run=lambda a: a, requires_confirmation="yes")  # type: ignore[arg-type]


def test_ask_user_answers_must_be_flat_and_options_positive() -> None:
    class Nested(BaseModel):
        account: Refund

    with pytest.raises(TypeError, match="field 'account' is not a scalar"):
        ask_user(answer=Nested)
    with pytest.raises(TypeError, match="answer= must be flat"):
        ask_user(answer=list[str])
    assert ask_user(answer=int).human is not None
    for name in ("approval_hold", "approval_timeout"):
        with pytest.raises(ValueError, match=name):
            ToolOptions(**{name: 0})
