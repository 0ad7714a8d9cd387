"""The CLI on a PostgreSQL journal: ``--journal URL`` on every command, ``TOOLBRIDGE_JOURNAL``
as the default, ``runs`` showing who holds each run, and ``serve --recover``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
from pathlib import Path

from toolbridge._journal.base import open_journal
from toolbridge._records import now

TOOLBRIDGE = str(Path(sys.executable).with_name("toolbridge"))
WAIT = 60.0

APP = """
import sys
from toolbridge import Bridge, event_type

bridge = Bridge(tools={"double": lambda n: n * 2}, run_lease=0.5)  # journal: TOOLBRIDGE_JOURNAL


@bridge.function(id="job", trigger=event_type("job/start"))
async def job(ctx):
    value = await ctx.step.run("work", lambda: ctx.event.data["n"] + 1)
    print(f"job done {value}", flush=True)
    return value
"""


async def toolbridge(cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE,
        *args,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


def write_app(tmp_path: Path) -> Path:
    (tmp_path / "fleet_app.py").write_text(textwrap.dedent(APP))
    return tmp_path


async def test_runs_shows_each_runs_owner_and_lease(pg_url: str, tmp_path: Path) -> None:
    journal = open_journal(pg_url, owner="host-a:41:beef")
    await journal.open()
    try:
        await journal.enter_run("held", lease=600)
        await journal.enter_run("left", lease=600)
        await journal.end_run("left", "completed")
        await journal.release_run("left")
        code, out, err = await toolbridge(tmp_path, "runs", "--journal", pg_url)
        assert code == 0, err
        held = next(line for line in out.splitlines() if line.strip().startswith("held"))
        left = next(line for line in out.splitlines() if line.strip().startswith("left"))
        assert "host-a:41:beef" in held
        assert "until" in held
        assert "released" in left
        code, out, err = await toolbridge(tmp_path, "runs", "--json", env={"TOOLBRIDGE_JOURNAL": pg_url})
        assert code == 0, err
        runs = {run["run_id"]: run for run in json.loads(out)}
        assert runs["held"]["owner"] == "host-a:41:beef"
        assert runs["held"]["lease_expires_at"] > now() + 500
        assert runs["held"]["fence"] == 1
        assert runs["left"]["lease_expires_at"] is None
    finally:
        await journal.close()


async def test_call_and_trace_with_the_journal_in_the_environment(pg_url: str, tmp_path: Path) -> None:
    app = write_app(tmp_path)
    env = {"TOOLBRIDGE_JOURNAL": pg_url}
    code, out, err = await toolbridge(
        app, "call", "fleet_app:bridge", "double", "--input", "[21]", "--run-id", "r1", env=env
    )
    assert (code, json.loads(out)) == (0, 42), err
    code, out, err = await toolbridge(app, "trace", "r1", "--json", "--journal", pg_url)
    assert code == 0, err
    (call,) = json.loads(out)["tree"]
    assert (call["name"], call["output"]) == ("double", 42)
    code, out, err = await toolbridge(app, "definitions", "fleet_app:bridge", "--journal", pg_url)
    assert code == 0, err
    assert [d["name"] for d in json.loads(out)] == ["double"]


async def test_a_bridge_without_a_journal_says_how_to_give_one(tmp_path: Path) -> None:
    app = write_app(tmp_path)
    env = {key: value for key, value in os.environ.items() if key != "TOOLBRIDGE_JOURNAL"}
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE, "definitions", "fleet_app:bridge", cwd=app, env=env, stderr=asyncio.subprocess.PIPE
    )
    _, stderr = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 2
    assert "TOOLBRIDGE_JOURNAL" in stderr.decode()


async def test_serve_recover_resumes_a_function_run_whose_daemon_died(pg_url: str, tmp_path: Path) -> None:
    app = write_app(tmp_path)
    # A daemon that died mid-run: it entered the function's run for its event, then nothing.
    dead = open_journal(pg_url, owner="host-dead:1:0")
    await dead.open()
    event = {"id": "evt_lost", "name": "job/start", "data": {"n": 41}, "ts": now()}
    await dead.record_event(event)
    await dead.enter_run("job/evt_lost", lease=0.2)  # and never renews it
    serve = await asyncio.create_subprocess_exec(
        TOOLBRIDGE, "serve", "fleet_app:bridge", "--journal", pg_url, "--recover",
        cwd=app, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert serve.stdout is not None
        async with asyncio.timeout(WAIT):
            lines: list[str] = []
            while not any(line.startswith("job done") for line in lines):
                line = (await serve.stdout.readline()).decode()
                assert line, f"serve ended: {(await serve.communicate())[1].decode()}"
                lines.append(line)
        assert "job done 42\n" in lines
        code, out, err = await toolbridge(app, "runs", "--json", "--journal", pg_url)
        assert code == 0, err
        (run,) = json.loads(out)
        assert (run["run_id"], run["status"], run["fence"]) == ("job/evt_lost", "completed", 2)
        assert run["owner"] != "host-dead:1:0"
    finally:
        serve.send_signal(signal.SIGTERM)
        await asyncio.wait_for(serve.communicate(), WAIT)
        await dead.close()  # releases nothing now: the run has another owner


async def test_serve_refuses_journal_over_a_bridge_that_names_its_own(tmp_path: Path) -> None:
    (tmp_path / "own.py").write_text(
        f"from toolbridge import Bridge\nbridge = Bridge(journal={str(tmp_path / 'own.db')!r})\n"
    )
    code, _, err = await toolbridge(
        tmp_path, "serve", "own:bridge", "--journal", "postgresql://u@/db?host=/x"
    )
    assert code == 2
    assert "leave journal= out" in err
