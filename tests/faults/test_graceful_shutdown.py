"""Item 5: SIGTERM to a host embedding ``Bridge`` lets the call in flight finish, then exits 0."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.host_programs import AGENT, GRACEFUL_HOST
from tests.helpers import wait_until
from tests.integration.test_sidecar import sandbox_elsewhere
from tests.integration.test_sidecar_cli import TOOLBRIDGE, toolbridge
from tests.security.conftest import _REASON as BWRAP_UNAVAILABLE
from toolbridge import Bridge, tool

WAIT = 60.0


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0"):
                    found.append(int(entry))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("sandbox", ["process", "bwrap"])
async def test_sigterm_mid_call_finishes_the_call_journals_it_stops_the_sandbox_and_exits_0(
    sandbox: str,
    tmp_path: Path,
    work_dir: Path,
    write_script: Callable[[str, str], Path],
    journal_path: Path,
) -> None:
    if sandbox == "bwrap" and BWRAP_UNAVAILABLE is not None:
        pytest.skip(BWRAP_UNAVAILABLE)
    (tmp_path / "host.py").write_text(GRACEFUL_HOST)
    write_script("agent.py", AGENT)
    write_script("hold", "")
    marker = "agent-" + secrets.token_hex(6)
    host = await asyncio.create_subprocess_exec(
        sys.executable,
        str(tmp_path / "host.py"),
        str(journal_path),
        sandbox,
        str(work_dir),
        marker,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert host.stdout is not None
        line = await asyncio.wait_for(host.stdout.readline(), WAIT)
        assert line == b"tool started\n", (line, await host.stderr.read() if host.stderr else b"")
        host.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(host.communicate(), WAIT)
    finally:
        if host.returncode is None:
            host.kill()
            await host.wait()
    assert host.returncode == 0, err.decode()
    assert "still running" not in err.decode()  # nothing was left to cancel
    assert out.decode().splitlines() == ["closed"]  # the command did not end by itself
    assert processes_with(marker) == []  # the sandbox was stopped
    with sqlite3.connect(journal_path) as db:
        steps = dict(db.execute("SELECT name, status FROM steps").fetchall())
        output = db.execute("SELECT output_json FROM steps WHERE name = 'refund'").fetchone()[0]
    # The call in flight finished within the grace and its outcome is journaled; the command
    # it belonged to was interrupted, so a replay runs it again.
    assert steps == {"agent": "running", "refund": "completed"}
    assert json.loads(output) == {"refunded": True}

    (work_dir / "hold").unlink()
    ran: list[int] = []

    def refund(args: object) -> dict[str, bool]:
        ran.append(1)
        return {"refunded": False}

    async with Bridge(journal=journal_path, sandbox="process") as bridge, bridge.run("order-1") as step:
        replayed = await step.sandbox.commands.run(
            "agent",
            ["python3", "agent.py", marker],
            tools={"refund": tool.step(run=refund)},
            cwd=work_dir,
        )
    assert json.loads(replayed.stdout) == {"refunded": True}  # answered from the journal
    assert ran == []


SIDECAR_APP = """
import asyncio
import contextlib
from pathlib import Path
from toolbridge import Bridge

bridge = Bridge(journal={journal!r})

@bridge.tool
async def settle(invoice: str) -> dict:
    Path({started!r}).write_text(invoice)
    await asyncio.sleep(2.0)  # longer than the old fixed 1 s drain
    return {{"settled": invoice}}
"""


async def test_serve_with_grace_lets_the_call_in_flight_finish_on_sigterm_and_exits_0(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    started = tmp_path / "started"
    journal = tmp_path / "sidecar.db"
    (app / "sidecar_app.py").write_text(SIDECAR_APP.format(journal=str(journal), started=str(started)))
    status, token, err = await toolbridge(
        app, "token", "mint", "sidecar_app:bridge", "--run", "vm", "--all-tools"
    )
    assert status == 0, err
    serve = await asyncio.create_subprocess_exec(
        TOOLBRIDGE,
        "serve",
        "sidecar_app:bridge",
        "--socket",
        str(tmp_path / "s.sock"),
        "--grace",
        "20",
        cwd=app,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert serve.stdout is not None
        address = (await asyncio.wait_for(serve.stdout.readline(), WAIT)).decode().strip()
        assert address.startswith("TOOLBRIDGE_ADDRESS="), address
        call = asyncio.ensure_future(
            sandbox_elsewhere(
                tmp_path, address.removeprefix("TOOLBRIDGE_ADDRESS="), token.strip(), [("settle", ["inv-1"])]
            )
        )
        await wait_until(started.exists)
        serve.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(call, WAIT) == [{"result": {"settled": "inv-1"}}]
        assert await asyncio.wait_for(serve.wait(), WAIT) == 0
    finally:
        if serve.returncode is None:
            serve.kill()
            await serve.wait()
    with sqlite3.connect(journal) as db:
        steps = db.execute("SELECT status FROM steps WHERE name = 'settle'").fetchall()
    assert steps == [("completed",)]


async def test_calls_after_shutdown_began_are_refused_while_the_one_in_flight_finishes(
    tmp_path: Path,
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    bridge = Bridge(journal=tmp_path / "drain.db", shutdown_grace=20)

    @bridge.tool
    async def block() -> str:
        entered.set()
        await release.wait()
        return "done"

    @bridge.tool
    def ping() -> str:
        return "pong"

    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(bridge)
        token = (await bridge.mint_token(run_id="drain", tools=["block", "ping"])).token
        assert token is not None
        # One client process, one stream: `ping` goes out once `block` has answered.
        client = asyncio.ensure_future(
            sandbox_elsewhere(tmp_path, bridge.address, token, [("block", []), ("ping", [])])
        )
        await asyncio.wait_for(entered.wait(), WAIT)
        closing = asyncio.ensure_future(bridge.aclose())
        await asyncio.sleep(0)  # let aclose begin: from here on, new calls are refused
        release.set()
        assert await asyncio.wait_for(client, WAIT) == [{"result": "done"}, {"error": "Unavailable"}]
        await asyncio.wait_for(closing, WAIT)


async def test_closing_returns_when_the_last_call_ends_not_after_the_grace(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The run's block is cancelled (as a signal does) while its call runs; the grace is an hour."""
    entered, release = asyncio.Event(), asyncio.Event()
    bridge = Bridge(journal=tmp_path / "close.db", shutdown_grace=3600)

    @bridge.tool
    async def settle() -> str:
        entered.set()
        await release.wait()
        return "settled"

    async def body() -> None:
        async with bridge.run("close-1"):
            await asyncio.Event().wait()  # the host's own work, until the signal

    await bridge.__aenter__()
    try:
        holder = asyncio.ensure_future(body())
        token = (await bridge.mint_token(run_id="close-1", tools=["settle"])).token
        assert token is not None
        client = asyncio.ensure_future(sandbox_elsewhere(tmp_path, bridge.address, token, [("settle", [])]))
        await asyncio.wait_for(entered.wait(), WAIT)
        holder.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await holder
        closing = asyncio.ensure_future(bridge.aclose())
        await asyncio.sleep(0)  # closing has begun: it waits for the call in flight
        assert not closing.done()
        release.set()
        assert await asyncio.wait_for(client, WAIT) == [{"result": "settled"}]
        await asyncio.wait_for(closing, WAIT)  # without the fix: an hour
    finally:
        release.set()
        await bridge.aclose()
    assert not [r for r in caplog.records if "still running" in r.getMessage()]
    with sqlite3.connect(tmp_path / "close.db") as db:
        steps = db.execute("SELECT status FROM steps WHERE name = 'settle'").fetchall()
    assert steps == [("completed",)]
