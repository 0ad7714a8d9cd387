"""Replay: entering a run again answers completed steps from the journal without running them."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import textwrap
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import WAIT
from toolbridge import Bridge, ReplayMismatchError, StepError, ToolContext, ToolError, ToolOptions, tool

AGENT = """
import asyncio, json, os, random
from inngest_tools import tools, ToolError

async def call(name, *args):
    try:
        return {"value": await getattr(tools, name)(*args)}
    except ToolError as error:
        return {"error": error.type, "message": error.message}

async def main():
    with open("starts.txt", "a") as starts:
        starts.write(f"{os.getpid()}\\n")
    plan = json.load(open("plan.json"))
    answers = []
    for group in plan["groups"]:
        calls = [call(name, *args) for name, args in group]
        answers.extend(await asyncio.gather(*calls))
    entry = open("entry").read() if os.path.exists("entry") else "1"
    json.dump(answers, open(f"answers-{entry}.json", "w"))
    if plan.get("block"):
        await tools.block()

asyncio.run(main())
"""


class Tools:
    """Tools that count their invocations, and a `block` tool the test can hold or release."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.blocked = asyncio.Event()
        self.release = asyncio.Event()

    def mapping(self) -> Mapping[str, object]:
        def add(a: int, b: int) -> int:
            self.calls[f"add{a},{b}"] += 1
            return a + b

        def fail(reason: str) -> None:
            self.calls["fail"] += 1
            raise ToolError(reason, type="Refused")

        async def block() -> str:
            self.blocked.set()
            await self.release.wait()
            return "released"

        return {"add": add, "fail": fail, "block": block}


def write_plan(work: Path, groups: list[list[tuple[str, list[Any]]]], *, block: bool = False) -> None:
    (work / "agent.py").write_text(textwrap.dedent(AGENT))
    (work / "plan.json").write_text(json.dumps({"groups": groups, "block": block}))


async def enter(journal: Path, work: Path, tools: Tools, entry: int, run_id: str = "r") -> Any:
    # The entry's number in a file, not in env=: another env is another step to a replay.
    (work / "entry").write_text(str(entry))
    async with Bridge(journal=journal) as bridge, bridge.run(run_id) as step:
        return await step.sandbox.commands.run("agent", "python3 agent.py", tools=tools.mapping(), cwd=work)


async def interrupt(journal: Path, work: Path, tools: Tools, entry: int) -> None:
    """Run an entry until the agent blocks, then cancel it, as a dying host would stop."""
    task = asyncio.create_task(enter(journal, work, tools, entry))
    await asyncio.wait_for(tools.blocked.wait(), WAIT)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def answers(work: Path, entry: int) -> list[dict[str, Any]]:
    return list(json.loads((work / f"answers-{entry}.json").read_text()))


def tool_steps(journal: Path) -> dict[str, sqlite3.Row]:
    with sqlite3.connect(journal) as db:
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT * FROM steps WHERE kind = 'tool'").fetchall()
    return {row["name"] + row["input_json"]: row for row in rows}


async def test_a_completed_command_is_not_run_again(journal_path: Path, tmp_path: Path) -> None:
    tools = Tools()
    write_plan(tmp_path, [[("add", [1, 2])]])
    first = await enter(journal_path, tmp_path, tools, 1)
    (tmp_path / "answers-1.json").unlink()
    again = await enter(journal_path, tmp_path, tools, 2)
    assert (first.replayed, again.replayed) == (False, True)
    assert (again.exit_code, again.stdout, again.stderr) == (first.exit_code, first.stdout, first.stderr)
    assert not (tmp_path / "answers-2.json").exists()  # the process never started
    assert tools.calls == {"add1,2": 1}


async def test_an_interrupted_command_reruns_and_completed_calls_come_from_the_journal(
    journal_path: Path, tmp_path: Path
) -> None:
    tools = Tools()
    write_plan(tmp_path, [[("add", [1, 2])], [("fail", ["no"])], [("add", [3, 4])]], block=True)
    await interrupt(journal_path, tmp_path, tools, 1)
    assert tools.calls == {"add1,2": 1, "fail": 1, "add3,4": 1}

    tools.release.set()
    result = await enter(journal_path, tmp_path, tools, 2)
    assert result.exit_code == 0, result.stderr
    assert answers(tmp_path, 2) == answers(tmp_path, 1)
    assert answers(tmp_path, 2)[1] == {"error": "Refused", "message": "no"}  # the recorded ToolError
    assert tools.calls == {"add1,2": 1, "fail": 1, "add3,4": 1}  # nothing ran twice


async def test_parallel_calls_meet_their_own_results_in_any_order(journal_path: Path, tmp_path: Path) -> None:
    tools = Tools()
    calls = [("add", [i, i]) for i in range(8)] + [("add", [9, 9])] * 3
    write_plan(tmp_path, [calls], block=True)
    await interrupt(journal_path, tmp_path, tools, 1)
    write_plan(tmp_path, [list(reversed(calls))])
    result = await enter(journal_path, tmp_path, tools, 2)
    assert result.exit_code == 0, result.stderr
    assert answers(tmp_path, 2) == list(reversed(answers(tmp_path, 1)))
    assert tools.calls["add9,9"] == 3  # three occurrences, three steps, each run once
    assert all(count == 1 for key, count in tools.calls.items() if key != "add9,9")


async def test_changed_calls_run_as_new_steps_and_old_ones_are_marked_stale(
    journal_path: Path, tmp_path: Path
) -> None:
    tools = Tools()
    write_plan(tmp_path, [[("add", [1, 1])], [("add", [2, 2])]], block=True)
    await interrupt(journal_path, tmp_path, tools, 1)
    write_plan(tmp_path, [[("add", [1, 1])], [("add", [5, 5])]])
    result = await enter(journal_path, tmp_path, tools, 2)
    assert result.exit_code == 0, result.stderr
    assert tools.calls == {"add1,1": 1, "add2,2": 1, "add5,5": 1}
    steps = tool_steps(journal_path)
    assert steps["add[2,2]"]["stale"] == 1  # recorded, but nobody asked for it again
    assert steps["add[1,1]"]["stale"] == 0
    assert steps["add[5,5]"]["stale"] == 0


async def test_a_step_is_memoized_across_bridges(journal_path: Path) -> None:
    ran: list[int] = []

    def charge() -> dict[str, int]:
        ran.append(1)
        return {"charged": 5}

    for _ in range(3):
        async with Bridge(journal=journal_path) as bridge, bridge.run("steps") as step:
            assert await step.run("charge", charge) == {"charged": 5}
            assert await step.run("charge", charge) == {"charged": 5}  # a second id: "charge#2"
    assert ran == [1, 1]


async def test_a_recorded_step_failure_is_raised_again_without_running(journal_path: Path) -> None:
    ran: list[int] = []

    def broken() -> None:
        ran.append(1)
        raise ToolError("card declined", type="Declined")

    for _ in range(2):
        async with Bridge(journal=journal_path) as bridge, bridge.run("fails") as step:
            with pytest.raises(StepError, match="card declined") as raised:
                await step.run("charge", broken)
            assert raised.value.type == "Declined"
    assert ran == [1]


async def test_a_step_asked_for_as_another_kind_is_a_replay_mismatch(
    journal_path: Path, tmp_path: Path
) -> None:
    async with Bridge(journal=journal_path) as bridge, bridge.run("mismatch") as step:
        await step.run("agent", lambda: 1)
    async with Bridge(journal=journal_path) as bridge, bridge.run("mismatch") as step:
        with pytest.raises(ReplayMismatchError, match="recorded as a run step"):
            await step.sandbox.commands.run("agent", "python3 -c pass", tools={}, cwd=tmp_path)


async def test_the_same_step_asked_twice_at_once_runs_once(journal_path: Path) -> None:
    started = asyncio.Event()
    release = asyncio.Event()
    ran: list[int] = []

    async def charge() -> str:
        ran.append(1)
        started.set()
        await release.wait()
        return "charged"

    asking = asyncio.Event()
    async with Bridge(journal=journal_path) as bridge:

        async def entry() -> Any:
            async with bridge.run("single") as step:
                asking.set()  # step.run reaches the in-flight call without yielding
                return await step.run("charge", charge)

        first = asyncio.create_task(entry())
        await asyncio.wait_for(started.wait(), WAIT)
        asking.clear()
        second = asyncio.create_task(entry())
        await asyncio.wait_for(asking.wait(), WAIT)
        release.set()
        assert list(await asyncio.wait_for(asyncio.gather(first, second), WAIT)) == ["charged", "charged"]
    assert ran == [1]


async def test_the_same_command_asked_twice_at_once_starts_one_process(
    journal_path: Path, tmp_path: Path
) -> None:
    tools = Tools()
    write_plan(tmp_path, [[("add", [1, 2])]], block=True)
    asking = asyncio.Event()
    async with Bridge(journal=journal_path) as bridge:

        async def entry() -> Any:
            async with bridge.run("single") as step:
                asking.set()  # commands.run reaches the in-flight command without yielding
                return await step.sandbox.commands.run(
                    "agent", "python3 agent.py", tools=tools.mapping(), cwd=tmp_path
                )

        first = asyncio.create_task(entry())
        await asyncio.wait_for(tools.blocked.wait(), WAIT)
        asking.clear()
        second = asyncio.create_task(entry())
        await asyncio.wait_for(asking.wait(), WAIT)
        tools.release.set()
        results = await asyncio.wait_for(asyncio.gather(first, second), WAIT)
    assert results[0] == results[1]
    assert len((tmp_path / "starts.txt").read_text().splitlines()) == 1
    assert tools.calls == {"add1,2": 1}


async def test_failing_calls_are_retried_with_one_idempotency_key(journal_path: Path, tmp_path: Path) -> None:
    keys: list[str] = []

    def flaky(args: dict[str, Any], ctx: ToolContext) -> str:
        keys.append(ctx.idempotency_key)
        if ctx.attempt < 3:
            raise ConnectionError("the payment API timed out")
        return "ok"

    write_plan(tmp_path, [[("flaky", [{"amount": 1}])]])
    async with Bridge(journal=journal_path) as bridge, bridge.run("retry") as step:
        result = await step.sandbox.commands.run(
            "agent",
            "python3 agent.py",
            tools={"flaky": tool.step(run=flaky, attempts=3)},
            cwd=tmp_path,
            tool_options=ToolOptions(retry_backoff=0.01),
        )
    assert result.exit_code == 0, result.stderr
    assert answers(tmp_path, 1) == [{"value": "ok"}]
    assert len(keys) == 3
    assert len(set(keys)) == 1
    step_row = tool_steps(journal_path)['flaky[{"amount":1}]']
    assert (step_row["status"], step_row["attempts"]) == ("completed", 3)
    log = json.loads(step_row["attempt_log"])
    assert [entry["attempt"] for entry in log] == [1, 2, 3]
    assert "ConnectionError" in log[0]["error"]["exception"]
    assert "error" not in log[2]
