"""`toolbridge runs` and `toolbridge trace`, run as a user would run them, on a real journal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolbridge import Bridge, ToolError, ToolOptions

CLI = Path(sys.executable).with_name("toolbridge")


def toolbridge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
async def journal(tmp_path: Path) -> Path:
    path = tmp_path / "trace.db"
    (tmp_path / "agent.py").write_text(
        "import asyncio\n"
        "from inngest_tools import tools, ToolError\n"
        "async def main():\n"
        "    print(await tools.lookup('cus_1'))\n"
        "    try:\n"
        "        await tools.flaky()\n"
        "    except ToolError as error:\n"
        "        print(error.type)\n"
        "asyncio.run(main())\n"
    )

    def flaky() -> None:
        raise RuntimeError("upstream said: password=hunter2")

    async with Bridge(journal=path) as bridge:
        async with bridge.run("order-7") as step:
            await step.sandbox.commands.run(
                "agent",
                "python3 agent.py",
                cwd=tmp_path,
                tools={"lookup": lambda customer_id: {"id": customer_id, "name": "Acme"}, "flaky": flaky},
                tool_options=ToolOptions(retry_backoff=0.001),
            )
        with pytest.raises(ToolError):
            async with bridge.run("order-8") as step:
                raise ToolError("the host gave up")
    return path


async def test_runs_lists_the_runs(journal: Path) -> None:
    listed = toolbridge("runs", "--journal", str(journal))
    assert listed.returncode == 0, listed.stderr
    assert "order-7" in listed.stdout
    assert "completed" in listed.stdout
    assert "order-8" in listed.stdout
    assert "failed" in listed.stdout
    as_json = json.loads(toolbridge("runs", "--journal", str(journal), "--json").stdout)
    assert {run["run_id"]: run["status"] for run in as_json} == {"order-7": "completed", "order-8": "failed"}
    assert next(run for run in as_json if run["run_id"] == "order-7")["steps"] == 3


async def test_trace_shows_the_tree_with_attempts_and_errors(journal: Path) -> None:
    shown = toolbridge("trace", "order-7", "--journal", str(journal))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("run order-7  completed")
    assert any(
        "agent  command  completed" in line and "$ python3 agent.py → exit 0" in line for line in lines
    )
    assert any(
        "lookup  tool  completed" in line and '["cus_1"] → {"id":"cus_1","name":"Acme"}' in line
        for line in lines
    )
    assert any("flaky  tool  failed" in line and "3 attempts" in line for line in lines)
    attempts = [line for line in lines if "attempt " in line]
    assert len(attempts) == 3
    assert all("RuntimeError: upstream said" in line for line in attempts)  # the host sees the detail


async def test_trace_json_holds_everything(journal: Path) -> None:
    tree = json.loads(toolbridge("trace", "order-7", "--journal", str(journal), "--json").stdout)
    (agent,) = tree["tree"]
    assert agent["kind"] == "command"
    assert [child["name"] for child in agent["children"]] == ["lookup", "flaky"]
    flaky = agent["children"][1]
    assert flaky["error"]["type"] == "InternalError"
    assert len(flaky["attempts"]) == 3
    assert "hunter2" in flaky["attempts"][0]["error"]["traceback"]


async def test_long_values_are_cut_in_the_terminal_view(tmp_path: Path) -> None:
    path = tmp_path / "long.db"
    async with Bridge(journal=path) as bridge, bridge.run("long") as step:
        await step.run("big", lambda: "x" * 500)
    shown = toolbridge("trace", "long", "--journal", str(path))
    assert '"' + "x" * 58 + "…" in shown.stdout  # the JSON string, cut to 60 characters
    assert "x" * 59 not in shown.stdout


def test_a_missing_journal_or_run_is_a_clear_error(tmp_path: Path) -> None:
    missing = toolbridge("runs", "--journal", str(tmp_path / "nope.db"))
    assert missing.returncode == 2
    assert "no journal at" in missing.stderr
    assert not (tmp_path / "nope.db").exists()


async def test_an_unknown_run_is_a_clear_error(journal: Path) -> None:
    unknown = toolbridge("trace", "no-such-run", "--journal", str(journal))
    assert unknown.returncode == 2
    assert "no run 'no-such-run'" in unknown.stderr
