"""Cancelling a run from the web view: a person logged in stops a running command (the
bridge holding the run finds its lease taken at its next renewal and stops the command), the
run is shown cancelled, and the journal says who did it, through what and why. A run waiting
on a person is cancelled with its request. Without the login, or without an Origin, nothing
is cancelled."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.test_approvals import pending, refund_tool, start
from tests.faces.conftest import WAIT, log_in, open_url
from tests.faces.test_web_find import shoot
from tests.faces.test_web_login import form_token, post
from tests.faces.test_web_view import browser, new_page  # noqa: F401 (the fixture)
from toolbridge import Bridge, CommandResult

SLEEPER = """
import asyncio, time
from inngest_tools import tools

async def main():
    await tools.started()
    time.sleep(600)  # until stopped

asyncio.run(main())
"""

LEASE = 0.6
"""A short run lease: the holder renews every LEASE / 3 seconds, and finds the cancel then."""


def cancellations(journal: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(journal) as db:
        return list(db.execute("SELECT run_id, cancelled_by, channel, reason FROM run_cancellations"))


async def test_a_person_cancels_a_running_command_from_the_page(
    browser: Any,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    problems: list[str] = []
    journal = tmp_path / "cancel.db"
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    started = asyncio.Event()

    def mark_started() -> str:
        started.set()
        return "ok"

    async with Bridge(journal=journal, run_lease=LEASE) as bridge:

        async def job() -> CommandResult:
            async with bridge.run("long-job") as step:
                return await step.sandbox.commands.run(
                    "sleeper", ["python3", str(script)], tools={"started": mark_started}, cwd=tmp_path
                )

        running = asyncio.ensure_future(job())
        await asyncio.wait_for(started.wait(), WAIT)
        async with bridge.serve_ui(port=0) as login_url:
            page = await new_page(browser, problems)
            await page.goto(login_url)
            await page.goto(login_url.split("?")[0] + "runs/long-job")
            await page.locator(".summary .pill.running").wait_for()
            await page.fill("#canceller", "")
            await page.click("#cancel-run")
            assert "Enter your name first" in await page.locator("#cancel-status").inner_text()
            await page.fill("#canceller", "alice")
            await page.fill("#cancel-reason", "wrong customer")
            await page.click("#cancel-run")
            await page.locator(".summary .pill.cancelled").wait_for()
            assert await page.locator("#cancel-status").inner_text() == "cancelled by alice"
            said = await page.locator(".run-error").inner_text()
            assert "cancelled by alice via web: wrong customer" in said
            # The command stops: the bridge finds its lease on the run taken.
            outcome = await asyncio.wait_for(asyncio.gather(running, return_exceptions=True), WAIT)
            await page.locator('li.step[data-step="sleeper"] .marker.cancelled').wait_for()
            await shoot(page, "run-cancelled.png", tmp_path)
    result = outcome[0]
    if isinstance(result, CommandResult):
        assert result.exit_code != 0, result  # stopped, not finished
    else:
        assert "long-job" in str(result), result  # the run was taken: its holder says so
    assert cancellations(journal) == [("long-job", "alice", "web", "wrong customer")]
    with sqlite3.connect(journal) as db:
        status, error = db.execute("SELECT status, error FROM runs WHERE run_id = 'long-job'").fetchone()
    assert (status, error) == ("failed", "cancelled by alice via web: wrong customer")
    assert problems == []


async def test_a_waiting_run_is_cancelled_with_its_request_and_only_by_a_person_logged_in(
    bridge: Bridge, script: Callable[[str, str], Path], journal_path: Path
) -> None:
    ran: list[int] = []
    task = start(bridge, script, {"refund": refund_tool(ran, requires_confirmation=True)}, [("big", 500)])
    (req,) = await pending(bridge)
    async with bridge.serve_ui(port=0) as login_url:
        base, cookie = await asyncio.to_thread(log_in, login_url)
        token = await asyncio.to_thread(form_token, base, cookie)
        where = f"{base}api/runs/hitl/cancel"
        body = {"by": "mallory"}
        origin = base.rstrip("/")
        for headers, status in (
            ({"x-toolbridge-token": token, "origin": origin}, 401),  # the page's token, no login
            ({"cookie": cookie, "x-toolbridge-token": token}, 403),  # no Origin
            ({"cookie": cookie, "origin": origin}, 403),  # no form token
        ):
            said_status, _ = await asyncio.to_thread(post, where, body, headers)
            assert said_status == status, headers
        assert (await bridge.approvals.get(req.id)).state == "pending"

        every = {"cookie": cookie, "origin": origin, "x-toolbridge-token": token}
        status, said = await asyncio.to_thread(post, where, {"reason": "x"}, every)
        assert (status, said["error"]) == (400, "say who cancels: a name of 1 to 200 characters")
        status, said = await asyncio.to_thread(post, where, {"by": "x" * 201}, every)
        assert (status, said["error"]) == (400, "say who cancels: a name of 1 to 200 characters")
        status, said = await asyncio.to_thread(post, where, {"by": "bob", "reason": "x" * 70_000}, every)
        assert (status, said["error"]) == (413, "a cancel is at most 65536 bytes")
        status, said = await asyncio.to_thread(post, where, ["bob"], every)
        assert (status, said["error"]) == (400, "the body must be a JSON object")
        json_type = {"content-type": "application/json", **every}
        status, _, raw = await asyncio.to_thread(open_url, where, data=b'{"by": ', headers=json_type)
        assert (status, raw) == (400, b'{"error":"the body is not JSON"}')
        status, said = await asyncio.to_thread(post, f"{base}api/runs/nope/cancel", {"by": "bob"}, every)
        assert status == 404
        status, said = await asyncio.to_thread(post, where, {"by": "bob", "reason": "duplicate order"}, every)
        assert status == 200, said
        assert said["status"] == "cancelled"
        cancelled = await bridge.approvals.get(req.id)
        assert (cancelled.state, cancelled.decided_by, cancelled.channel) == ("cancelled", "bob", "web")
        status, said = await asyncio.to_thread(post, where, {"by": "bob"}, every)
        assert status == 409
        assert "only a running or waiting run is cancelled" in said["error"]
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), WAIT)
    assert ran == []
    assert cancellations(journal_path) == [("hitl", "bob", "web", "duplicate order")]
