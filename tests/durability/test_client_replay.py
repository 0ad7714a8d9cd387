"""Client-side replay: a re-run command answers its recorded calls itself, exactly as the daemon would.

An interrupted command runs again on replay; the daemon hands it what it recorded
(``TOOLBRIDGE_REPLAY``) and the client answers those calls without the socket. These tests
run real daemons, real SQLite files and real sandboxed processes, and check that the answers
are the ones the daemon would give: the n-th call of a (tool, input) meets the n-th record,
across processes of one command too, a call interrupted while running is run again, and the
daemon still learns which recorded calls were asked again (``not_asked_again``, stale marks).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import WAIT
from toolbridge import Bridge, ToolError, ToolOptions

AGENT = """
import asyncio, json, os, shutil, sys
from inngest_tools import tools, ToolError

if os.environ.get("TOOLBRIDGE_REPLAY"):  # what this command was handed, for the test to read
    shutil.copy(os.environ["TOOLBRIDGE_REPLAY"], f"records-{os.environ['ENTRY']}.json")

async def call(name, *args):
    try:
        return {"value": await getattr(tools, name)(*args)}
    except ToolError as error:
        return {"error": error.type, "message": error.message}

async def main():
    plan = json.load(open("plan.json"))
    answers = []
    for group in plan["groups"]:
        answers.extend(await asyncio.gather(*(call(name, *args) for name, args in group)))
    entry = os.environ["ENTRY"]
    with open(f"answers-{entry}-{sys.argv[1] if len(sys.argv) > 1 else 'main'}.json", "w") as out:
        json.dump(answers, out)
    if entry == "1" and sys.argv[1:2] != ["first"]:
        await tools.block()

asyncio.run(main())
"""


class Tools:
    """Tools that count their invocations; ``block`` and a counter's second run hold the first entry."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.blocked = asyncio.Event()

    def mapping(self) -> Mapping[str, object]:
        def add(a: int, b: int) -> int:
            self.calls[f"add{a},{b}"] += 1
            return a + b

        def fail(reason: str) -> None:
            self.calls["fail"] += 1
            raise ToolError(reason, type="Refused")

        async def count() -> int:
            self.calls["count"] += 1
            number = self.calls["count"]
            if number == 2:  # the second invocation never ends in the first entry
                await asyncio.Event().wait()
            return number

        def counter() -> int:
            self.calls["counter"] += 1
            return self.calls["counter"]

        async def block() -> None:
            self.blocked.set()
            await asyncio.Event().wait()

        return {
            "add": add,
            "fail": fail,
            "count": count,
            "counter": counter,
            "block": block,
            "fresh": lambda: "f",
        }


def write_agent(work: Path, groups: Sequence[Sequence[tuple[str, list[Any]]]]) -> None:
    (work / "agent.py").write_text(textwrap.dedent(AGENT))
    (work / "plan.json").write_text(json.dumps({"groups": groups}))


async def enter(
    journal: Path,
    work: Path,
    tools: Tools,
    entry: int,
    *,
    command: str = "python3 agent.py",
    max_calls: int = 100,
    **env: str,
) -> Any:
    async with Bridge(journal=journal) as bridge, bridge.run("r") as step:
        return await step.sandbox.commands.run(
            "agent",
            command,
            tools=tools.mapping(),
            cwd=work,
            env={"ENTRY": str(entry), **env},
            tool_options=ToolOptions(attempts=1, max_calls=max_calls),
        )


async def interrupt(journal: Path, work: Path, tools: Tools, **kwargs: Any) -> None:
    """Run the first entry until its agent blocks, then cancel it, as a dying host would stop."""
    task = asyncio.create_task(enter(journal, work, tools, 1, **kwargs))
    await asyncio.wait_for(tools.blocked.wait(), WAIT)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def answers(work: Path, entry: int, name: str = "main") -> list[dict[str, Any]]:
    return list(json.loads((work / f"answers-{entry}-{name}.json").read_text()))


def stale_flags(journal: Path) -> dict[str, int]:
    with sqlite3.connect(journal) as db:
        rows = db.execute("SELECT name, input_json, stale FROM steps WHERE kind = 'tool'").fetchall()
    return {f"{name}{input_json}": stale for name, input_json, stale in rows}


async def test_recorded_calls_are_answered_in_the_sandbox_without_reaching_the_daemon(
    journal_path: Path, tmp_path: Path
) -> None:
    tools = Tools()
    write_agent(tmp_path, [[("add", [1, 2])], [("fail", ["no"])], [("add", [3, 4])]])
    await interrupt(journal_path, tmp_path, tools)
    (tmp_path / "plan.json").write_text(
        json.dumps({"groups": [[("add", [1, 2])], [("fail", ["no"])], [("add", [3, 4])], [("fresh", [])]]})
    )
    # The re-run cannot reach the daemon at all: what it gets back came from its records.
    result = await enter(journal_path, tmp_path, tools, 2, TOOLBRIDGE_ADDRESS="unix:/nonexistent/bridge.sock")
    assert result.exit_code == 0, result.stderr
    got = answers(tmp_path, 2)
    assert got[:3] == answers(tmp_path, 1)
    assert got[1] == {"error": "Refused", "message": "no"}  # a recorded ToolError, as recorded
    assert got[3]["error"] == "Unavailable"  # a new call still needs the daemon
    assert tools.calls == {"add1,2": 1, "fail": 1, "add3,4": 1}
    assert [key.split("/")[1].split("@")[0] for key in result.not_asked_again] == ["block"]


COUNTS = """
import asyncio, json, os
from inngest_tools import tools

async def main():
    calls = [asyncio.ensure_future(tools.count()) for _ in range(3)]
    if os.environ["ENTRY"] == "1":
        # Two answers (each sent only once its outcome is committed), then hold: the third
        # call is the one whose tool never ends.
        pending = set(calls)
        while len(pending) > 1:
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        await tools.block()
    values = [await call for call in calls]
    json.dump(values, open("counts.json", "w"))

asyncio.run(main())
"""


async def test_the_nth_call_meets_the_nth_record_and_an_interrupted_one_runs_again(
    journal_path: Path, tmp_path: Path
) -> None:
    tools = Tools()
    (tmp_path / "counts.py").write_text(textwrap.dedent(COUNTS))
    # The first entry's second invocation of `count` never ends: two occurrences are
    # recorded done and one is left running.
    await interrupt(journal_path, tmp_path, tools, command="python3 counts.py")
    assert tools.calls["count"] == 3
    result = await enter(journal_path, tmp_path, tools, 2, command="python3 counts.py")
    assert result.exit_code == 0, result.stderr
    values = sorted(json.loads((tmp_path / "counts.json").read_text()))
    # Two answers are the recorded 1 and 3; the interrupted occurrence runs again (the fourth
    # invocation). Nothing is answered twice, nothing recorded runs again.
    assert values == [1, 3, 4]
    assert tools.calls["count"] == 4


async def test_processes_of_one_command_take_the_records_in_turn(journal_path: Path, tmp_path: Path) -> None:
    tools = Tools()
    write_agent(tmp_path, [[("counter", [])]])
    command = "sh -c 'python3 agent.py first && python3 agent.py second'"
    await interrupt(journal_path, tmp_path, tools, command=command)
    assert [answers(tmp_path, 1, name) for name in ("first", "second")] == [[{"value": 1}], [{"value": 2}]]
    result = await enter(journal_path, tmp_path, tools, 2, command=command)
    assert result.exit_code == 0, result.stderr
    # Each process met the record its place in the command had: the first call's, then the second's.
    assert [answers(tmp_path, 2, name) for name in ("first", "second")] == [[{"value": 1}], [{"value": 2}]]
    assert tools.calls["counter"] == 2


async def test_the_daemon_still_learns_which_recorded_calls_were_asked_again(
    journal_path: Path, tmp_path: Path
) -> None:
    tools = Tools()
    write_agent(tmp_path, [[("add", [1, 1])], [("add", [2, 2])]])
    await interrupt(journal_path, tmp_path, tools)
    (tmp_path / "plan.json").write_text(json.dumps({"groups": [[("add", [1, 1])], [("add", [5, 5])]]}))
    result = await enter(journal_path, tmp_path, tools, 2)
    assert result.exit_code == 0, result.stderr
    assert tools.calls == {"add1,1": 1, "add2,2": 1, "add5,5": 1}
    assert sorted(key.split("/")[1].split("@")[0] for key in result.not_asked_again) == ["add", "block"]
    flags = stale_flags(journal_path)
    assert (flags["add[1,1]"], flags["add[2,2]"], flags["add[5,5]"]) == (0, 1, 0)


async def test_calls_answered_in_the_sandbox_count_against_max_calls(
    journal_path: Path, tmp_path: Path
) -> None:
    tools = Tools()
    write_agent(tmp_path, [[("add", [1, 1])], [("add", [2, 2])], [("add", [3, 3])]])
    await interrupt(journal_path, tmp_path, tools)
    # Run again with a budget of two: the third call is refused though it is recorded, as the
    # daemon refuses it when every call reaches it, and the command is stopped.
    result = await enter(journal_path, tmp_path, tools, 2, max_calls=2)
    assert result.stopped == "max_calls"
    got = answers(tmp_path, 2)
    assert got[:2] == [{"value": 2}, {"value": 4}]
    assert got[2]["error"] == "MaxCallsExceeded"
    assert tools.calls == {"add1,1": 1, "add2,2": 1, "add3,3": 1}


async def test_a_command_is_given_only_its_own_records_and_only_the_daemons(
    journal_path: Path, tmp_path: Path
) -> None:
    tools = Tools()
    write_agent(tmp_path, [[("add", [7, 7])]])
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({"format": 1, "max_calls": 9, "max_request_bytes": 99, "calls": []}))
    async with Bridge(journal=journal_path) as bridge, bridge.run("r") as step:
        other = await step.sandbox.commands.run(
            "other", "python3 agent.py first", tools=tools.mapping(), cwd=tmp_path, env={"ENTRY": "0"}
        )
        assert other.exit_code == 0, other.stderr
    # A variable the host passes under the name is not the daemon's: it never reaches the command.
    await interrupt(journal_path, tmp_path, tools, TOOLBRIDGE_REPLAY=str(forged))
    assert not (tmp_path / "records-1.json").exists()
    result = await enter(journal_path, tmp_path, tools, 2)
    assert result.exit_code == 0, result.stderr
    handed = json.loads((tmp_path / "records-2.json").read_text())
    keys = [record["key"] for call in handed["calls"] for record in call["records"]]
    assert keys
    assert all(key.startswith("agent/") for key in keys)  # nothing of "other"
    assert [call["tool"] for call in handed["calls"]] == ["add"]  # not the running `block`
