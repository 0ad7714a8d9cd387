"""Per-run state (``ctx.state`` / ``ctx.network.state`` / ``step.state``): shared, journaled, replayed."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest

from toolbridge import Bridge, ToolContext, tool
from toolbridge._ui.view import entry_view
from toolbridge.testing import FakeLauncher, FakeSandbox, ToolHarness

TIMEOUT = 5.0


def _write_file(args: dict[str, Any], ctx: ToolContext) -> dict[str, bool]:
    ctx.network.state["fileWritten"] = True  # AgentKit's spelling
    ctx.state.setdefault("paths", []).append(args["path"])  # changed in place: recorded too
    return {"success": True}


def _check(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return {"fileWritten": ctx.state.get("fileWritten", False), "paths": ctx.state.get("paths", [])}


TOOLS = {"write-file": tool.step(run=_write_file), "check": tool.step(run=_check)}


async def _agent(sandbox: FakeSandbox) -> int:
    await sandbox.call("write-file", path="a.txt")
    seen = await sandbox.call("check")
    sandbox.write(f"{seen}\n")
    return 0


async def test_tools_share_the_state_and_the_host_reads_it_and_a_replay_restores_it(tmp_path: Path) -> None:
    seen_by_host: list[Any] = []
    launcher = FakeLauncher(_agent)

    async def order(bridge: Bridge) -> None:
        async with bridge.run("order-1") as step:
            step.state["tenant"] = "acme"  # host code: runs again on replay
            seen_by_host.append(copy.deepcopy(dict(step.state)))
            await step.sandbox.commands.run("agent", ["agent"], tools=TOOLS)
            seen_by_host.append(copy.deepcopy(dict(step.state)))
            await step.sandbox.commands.run("again", ["agent"], tools=TOOLS)
            seen_by_host.append(copy.deepcopy(dict(step.state)))

    async with launcher.bridge(tmp_path / "journal.db") as bridge:
        await order(bridge)
    first = list(seen_by_host)
    assert first[1] == {"tenant": "acme", "fileWritten": True, "paths": ["a.txt"]}
    assert first[2]["paths"] == ["a.txt", "a.txt"]
    seen_by_host.clear()
    async with launcher.bridge(tmp_path / "journal.db") as bridge:  # a host that came back
        await order(bridge)
    assert seen_by_host == first  # as it was after each step, without running a tool again
    assert len(launcher.specs) == 2


async def test_each_change_is_journaled_with_the_step_that_made_it_and_shown_in_the_trace() -> None:
    async with ToolHarness(TOOLS) as harness:
        await harness.call("write-file", path="a.txt")
        await harness.call("check")
        records = {rec.name: rec for rec in await harness.recorded()}
    [entry] = [e for e in records["write-file"].attempt_log if "state" in e]
    assert entry["state"]["fileWritten"]["value"] is True
    assert entry["state"]["paths"]["value"] == ["a.txt"]
    assert not any("state" in e for e in records["check"].attempt_log)  # it only read
    view = entry_view(entry)
    assert view["kind"] == "state"
    assert view["label"] == 'state: fileWritten=true, paths=["a.txt"]'


async def test_calls_replayed_one_by_one_restore_the_state_as_it_was_at_each() -> None:
    async def count(args: dict[str, Any], ctx: ToolContext) -> int:
        ctx.state["n"] = ctx.state.get("n", 0) + 1
        return int(ctx.state["n"])

    async with ToolHarness({"count": tool.step(run=count)}) as harness:
        first = [(await harness.call("count", i=i)).result for i in range(3)]
        await harness.restart()
        assert dict(harness.step.state) == {}  # nothing replayed yet
        again = []
        for i in range(3):
            call = await harness.call("count", i=i)
            again.append((call.result, harness.step.state["n"]))
    assert first == [1, 2, 3]
    assert again == [(1, 1), (2, 2), (3, 3)]


@pytest.mark.parametrize("replay_order", ["same", "reversed"])
async def test_two_parallel_steps_writing_one_key_leave_the_later_write_on_replay_too(
    replay_order: str,
) -> None:
    first_done = asyncio.Event()

    def first(args: dict[str, Any], ctx: ToolContext) -> str:
        ctx.state["owner"] = "first"
        return "first"

    async def second(args: dict[str, Any], ctx: ToolContext) -> str:
        await asyncio.wait_for(first_done.wait(), TIMEOUT)  # started before, writes after
        ctx.state["owner"] = "second"
        return "second"

    async def first_then_signal() -> None:
        await harness.call("first")
        first_done.set()

    tools = {"first": tool.step(run=first), "second": tool.step(run=second)}
    async with ToolHarness(tools) as harness:
        await asyncio.gather(harness.call("second"), first_then_signal())
        assert harness.step.state["owner"] == "second"
        await harness.restart()
        names = ["first", "second"] if replay_order == "same" else ["second", "first"]
        for name in names:
            assert (await harness.call(name)).replayed
        assert harness.step.state["owner"] == "second"


async def test_state_values_must_be_json_and_deletes_are_replayed() -> None:
    def forget(args: dict[str, Any], ctx: ToolContext) -> None:
        ctx.state["keep"] = 1
        ctx.state["gone"] = 2
        del ctx.state["gone"]
        with pytest.raises(TypeError, match="must be JSON data"):
            ctx.state["bad"] = object()

    async with ToolHarness({"forget": tool.step(run=forget)}) as harness:
        await harness.call("forget")
        await harness.restart()
        await harness.call("forget")
        assert dict(harness.step.state) == {"keep": 1}


async def test_a_durable_function_shares_the_run_state_with_the_tools_it_runs(tmp_path: Path) -> None:
    async def agent(sandbox: FakeSandbox) -> int:
        sandbox.write(f"{await sandbox.call('refund', order_id='o1')}\n")
        return 0

    launcher = FakeLauncher(agent)
    async with launcher.bridge(tmp_path / "journal.db") as bridge:

        @bridge.function(id="refund")
        async def refund(ctx: Any) -> str:
            ctx.state["refunded"] = [*ctx.state.get("refunded", []), ctx.event.data["order_id"]]
            return "ok"

        async with bridge.run("fn-state") as step:
            result = await step.sandbox.commands.run("agent", ["agent"], tools={"refund": refund})
            assert step.state == {"refunded": ["o1"]}
    assert result.stdout == "ok\n"
