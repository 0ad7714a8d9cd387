"""The replay engine, with no process and no gRPC: recorded steps come back without running,
a changed run is refused, an interrupted at-most-once call is never run again, and children a
re-run parent no longer asks for are marked stale.

Tool calls go through ``toolbridge.testing.ToolHarness`` (``restart()`` stands for a host that
stopped and came back on the same journal); commands run on ``FakeLauncher``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from toolbridge import (
    Bridge,
    CommandResult,
    ReplayMismatchError,
    StepError,
    ToolContext,
    ToolError,
    ToolOptions,
    tool,
)
from toolbridge.testing import FakeLauncher, FakeSandbox, ToolHarness

NO_WAIT = ToolOptions(attempts=3, retry_backoff=0, retry_backoff_max=0)
TIMEOUT = 5.0


async def test_a_completed_call_is_replayed_without_running_the_tool() -> None:
    runs: list[int] = []

    def lookup(args: dict[str, Any]) -> dict[str, Any]:
        runs.append(1)
        return {"name": "Ada", "n": len(runs)}

    async with ToolHarness({"lookup": tool.step(run=lookup)}) as harness:
        first = await harness.call("lookup", id=7)
        await harness.restart()
        again = await harness.call("lookup", id=7)
        [rec] = await harness.recorded()
    assert runs == [1]
    assert not first.replayed
    assert again.replayed
    assert again.step_key == first.step_key
    assert again.result_json == first.result_json  # byte for byte
    assert rec.status == "completed"


async def test_a_failed_call_replays_its_error() -> None:
    runs: list[int] = []

    def refuse(args: dict[str, Any]) -> None:
        runs.append(1)
        raise ToolError("card declined", type="Declined", retryable=False)

    async with ToolHarness({"charge": tool.step(run=refuse)}) as harness:
        first = await harness.call("charge", amount=5)
        await harness.restart()
        again = await harness.call("charge", amount=5)
    assert runs == [1]
    assert again.replayed
    assert again.error is not None
    assert first.error is not None
    assert (again.error.type, again.error.message) == (first.error.type, first.error.message)


async def test_other_arguments_are_another_step() -> None:
    runs: list[Any] = []
    async with ToolHarness({"lookup": tool.step(run=lambda a: runs.append(a["id"]))}) as harness:
        first = await harness.call("lookup", id=1)
        await harness.restart()
        other = await harness.call("lookup", id=2)
    assert runs == [1, 2]
    assert other.step_key != first.step_key
    assert not other.replayed


async def test_an_interrupted_at_most_once_call_is_never_run_again() -> None:
    started = asyncio.Event()
    runs: list[str] = []

    async def transfer(args: dict[str, Any]) -> str:
        runs.append("started")
        started.set()
        await asyncio.Event().wait()  # the host dies while the transfer is under way
        return "unreachable"

    transfer_tool = tool.step(run=transfer, at_most_once=True)
    async with ToolHarness({"transfer": transfer_tool}) as harness:
        pending = asyncio.ensure_future(harness.call("transfer", amount=100))
        async with asyncio.timeout(TIMEOUT):
            await started.wait()
        await harness.restart()
        again = await harness.call("transfer", amount=100)
        [rec] = await harness.recorded()
    pending.cancel()
    assert runs == ["started"]
    assert again.error is not None
    assert again.error.type == "StepInterrupted"
    assert not again.replayed
    assert rec.status == "failed"


async def test_an_interrupted_call_runs_again_with_the_same_idempotency_key() -> None:
    started = asyncio.Event()
    keys: list[str] = []

    async def ship(args: dict[str, Any], ctx: ToolContext) -> str:
        keys.append(ctx.idempotency_key)
        if len(keys) == 1:
            started.set()
            await asyncio.Event().wait()  # interrupted the first time
        return "shipped"

    async with ToolHarness({"ship": tool.step(run=ship)}) as harness:
        pending = asyncio.ensure_future(harness.call("ship", order="o-1"))
        async with asyncio.timeout(TIMEOUT):
            await started.wait()
        await harness.restart()
        again = await harness.call("ship", order="o-1")
    pending.cancel()
    assert again.result == "shipped"
    assert len(keys) == 2
    assert keys[0] == keys[1]


async def test_a_recorded_step_of_another_kind_is_a_replay_mismatch() -> None:
    async with ToolHarness({}) as harness:
        assert await harness.step.run("charge", lambda: 42) == 42
        await harness.restart()
        with pytest.raises(ReplayMismatchError, match="recorded as a run step"):
            await harness.step.sleep("charge", 0)


async def test_a_recorded_step_returns_its_value_and_its_failure() -> None:
    runs: list[str] = []

    def fail() -> None:
        runs.append("fail")
        raise ToolError("no", type="No", retryable=False)

    def value() -> dict[str, int]:
        runs.append("value")
        return {"a": 1}

    async with ToolHarness({}, options=NO_WAIT) as harness:
        assert await harness.step.run("value", value) == {"a": 1}
        with pytest.raises(StepError):
            await harness.step.run("failure", fail)
        await harness.restart()
        assert await harness.step.run("value", value) == {"a": 1}
        with pytest.raises(StepError):
            await harness.step.run("failure", fail)
    assert runs == ["value", "fail"]  # neither ran on replay


async def test_children_a_re_run_group_no_longer_asks_for_are_marked_stale() -> None:
    version = {"n": 1}
    interrupted = asyncio.Event()

    async def plan(args: dict[str, Any], ctx: ToolContext) -> str:
        if version["n"] == 1:
            await ctx.step.run("fetch", lambda: "v1")
            await ctx.step.run("price", lambda: 10)
            interrupted.set()
            await asyncio.Event().wait()  # the host dies before the group finishes
        await ctx.step.run("fetch", lambda: "v2")  # the code changed: no "price" any more
        return "planned"

    async with ToolHarness({"plan": tool.group(run=plan)}) as harness:
        pending = asyncio.ensure_future(harness.call("plan"))
        async with asyncio.timeout(TIMEOUT):
            await interrupted.wait()
        await harness.restart()
        version["n"] = 2
        call = await harness.call("plan")
        steps = {rec.name: rec for rec in await harness.recorded()}
    pending.cancel()
    assert call.result == "planned"
    assert steps["fetch"].output_json == '"v1"'  # replayed from the first execution
    assert not steps["fetch"].stale
    assert steps["price"].stale
    assert steps["price"].parent_key == call.step_key


# --- commands on FakeLauncher --------------------------------------------------------------------


async def test_a_command_step_is_recorded_and_replayed_without_a_process(tmp_path: Path) -> None:
    looked_up: list[int] = []

    def lookup(customer_id: int) -> dict[str, Any]:
        looked_up.append(customer_id)
        return {"id": customer_id, "name": "Ada"}

    async def agent(sandbox: FakeSandbox) -> int:
        customer = await sandbox.call("lookup", customer_id=7)
        sandbox.write(f"hello {customer['name']}\n")
        return 3

    launcher = FakeLauncher(agent)
    journal = tmp_path / "journal.db"
    async with launcher.bridge(journal) as bridge:
        async with bridge.run("order-1") as step:
            first = await step.sandbox.commands.run("agent", "python3 agent.py", tools={"lookup": lookup})
        async with bridge.run("order-1") as step:
            again = await step.sandbox.commands.run("agent", "python3 agent.py", tools={"lookup": lookup})
    assert (first.exit_code, first.stdout, first.replayed) == (3, "hello Ada\n", False)
    assert (again.exit_code, again.stdout, again.replayed) == (3, "hello Ada\n", True)
    assert looked_up == [7]
    [spec] = launcher.specs  # the replay launched nothing
    assert list(spec.argv) == ["python3", "agent.py"]
    assert spec.env["TOOLBRIDGE_TOKEN"].startswith("tb1.")


async def test_an_interrupted_command_runs_again_and_its_calls_replay(tmp_path: Path) -> None:
    looked_up: list[int] = []
    first_time = asyncio.Event()

    def lookup(customer_id: int) -> int:
        looked_up.append(customer_id)
        return customer_id * 2

    async def agent(sandbox: FakeSandbox) -> int:
        doubled = await sandbox.call("lookup", customer_id=21)
        if not first_time.is_set():
            first_time.set()
            await asyncio.Event().wait()  # the host dies while the command runs
        sandbox.write(f"{doubled}\n")
        return 0

    async def order(bridge: Bridge) -> CommandResult:
        async with bridge.run("order-2") as step:
            return await step.sandbox.commands.run("agent", ["agent"], tools={"lookup": lookup})

    journal = tmp_path / "journal.db"
    launcher = FakeLauncher(agent)
    async with launcher.bridge(journal) as bridge:
        interrupted = asyncio.ensure_future(order(bridge))
        async with asyncio.timeout(TIMEOUT):
            await first_time.wait()
        interrupted.cancel()
        with pytest.raises(asyncio.CancelledError):
            await interrupted
    async with launcher.bridge(journal) as bridge:  # the host again, on the same journal
        result = await order(bridge)
    assert (result.exit_code, result.stdout, result.replayed) == (0, "42\n", False)
    assert len(launcher.specs) == 2  # the command ran again...
    assert looked_up == [21]  # ...and its call came back from the journal


async def test_a_script_that_raises_exits_1_with_its_traceback() -> None:
    async def agent(sandbox: FakeSandbox) -> int:
        raise RuntimeError("the agent fell over")

    async with FakeLauncher(agent).bridge(None) as bridge, bridge.run() as step:
        result = await step.sandbox.commands.run("agent", ["agent"])
    assert result.exit_code == 1
    assert "RuntimeError: the agent fell over" in result.stderr


async def test_a_command_over_its_call_budget_is_stopped(tmp_path: Path) -> None:
    calls: list[int] = []

    async def greedy(sandbox: FakeSandbox) -> int:
        for n in range(10):
            try:
                await sandbox.call("count", n=n)
            except ToolError as exc:
                sandbox.write(exc.type)
                await asyncio.Event().wait()  # keeps going until it is stopped
        return 0

    launcher = FakeLauncher(greedy)
    async with launcher.bridge(None) as bridge, bridge.run() as step:
        result = await step.sandbox.commands.run(
            "greedy",
            "greedy",
            tools={"count": lambda n: calls.append(n)},
            tool_options=ToolOptions(max_calls=2),
        )
    assert calls == [0, 1]
    assert result.stopped == "max_calls"
    assert result.exit_code == -9
    assert result.stdout == "MaxCallsExceeded"


async def test_a_script_past_its_timeout_is_stopped() -> None:
    async def stuck(sandbox: FakeSandbox) -> int:
        sandbox.write("working")
        await asyncio.Event().wait()
        return 0

    async with FakeLauncher(stuck).bridge(None) as bridge, bridge.run() as step:
        result = await step.sandbox.commands.run("stuck", "stuck", timeout=0.05)
    assert (result.stopped, result.exit_code, result.stdout) == ("timeout", -9, "working")


async def test_a_commands_token_ends_with_it(tmp_path: Path) -> None:
    kept: list[FakeSandbox] = []

    async def leaks(sandbox: FakeSandbox) -> int:
        kept.append(sandbox)
        return 0

    launcher = FakeLauncher(leaks)
    async with launcher.bridge(None) as bridge, bridge.run() as step:
        await step.sandbox.commands.run("leaks", "x", tools={"noop": lambda: None})
        with pytest.raises(ToolError) as refused:
            await kept[0].call("noop")
    assert refused.value.type == "Unauthenticated"


async def test_a_command_recorded_under_another_kind_is_a_replay_mismatch(tmp_path: Path) -> None:
    launcher = FakeLauncher(exit_code=0)
    async with launcher.bridge(tmp_path / "journal.db") as bridge:
        async with bridge.run("r") as step:
            await step.run("agent", lambda: 1)
        with pytest.raises(ReplayMismatchError):
            async with bridge.run("r") as step:
                await step.sandbox.commands.run("agent", "true")
    assert launcher.specs == []


async def test_a_fake_launcher_without_a_bridge_says_how_to_attach() -> None:
    from toolbridge._sandbox.launcher import LaunchSpec, StopSignal

    async def script(sandbox: FakeSandbox) -> int:
        await sandbox.call("x")
        return 0

    outcome = await FakeLauncher(script).run(
        LaunchSpec(argv=["x"], env={}, cwd=Path("/"), timeout=TIMEOUT), StopSignal()
    )
    assert outcome.exit_code == 1
    assert b"launcher.attach(bridge)" in outcome.stderr
