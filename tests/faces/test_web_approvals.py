"""Deciding in the browser: a real sandboxed call waits for approval while `toolbridge ui`
(another process, on the same journal file) shows the request; a person types a name, clicks
Approve, and the run finishes. Forged and second decisions are refused, and say why."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.test_approvals import output, pending, refund_tool, start
from tests.faces.conftest import REPO, WAIT, serving
from tests.faces.test_web_view import browser, new_page  # noqa: F401 (the fixture)
from toolbridge import Bridge

DOCS_SCREENSHOT = REPO / "docs" / "approval-page.png"


async def test_a_person_approves_a_waiting_call_in_the_browser(
    bridge: Bridge,
    script: Callable[[str, str], Path],
    journal_path: Path,
    browser: Any,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    problems: list[str] = []
    ran: list[int] = []
    task = start(bridge, script, {"refund": refund_tool(ran, requires_confirmation=True)}, [("big", 500)])
    (req,) = await pending(bridge)
    async for url, _ in serving(
        "ui", "--journal", str(journal_path), "--port", "0", env=dict(os.environ), prefix="TOOLBRIDGE_UI_URL"
    ):
        # The runs page lists what waits for a decision, linked to its run.
        # One browser: its second page below shares the login of the first.
        context = await browser.new_context()
        page = await new_page(context, problems)
        await page.goto(url)
        listed = page.locator(f'#pending tr[data-request="{req.id}"]')
        await listed.wait_for()
        assert "hitl" in await listed.inner_text()
        await listed.locator("a").click()

        # Under its call: the request, waiting; above the waterfall: what it asks, to decide.
        await page.locator(f'li.request.pending[data-request="{req.id}"]').wait_for()
        card = page.locator(f'.requests .request[data-request="{req.id}"]')
        await card.wait_for()
        assert '"amount": 500' in await card.inner_text()
        await page.screenshot(path=str(tmp_path / "run-page-pending.png"), full_page=True)
        if os.environ.get("TOOLBRIDGE_UPDATE_DOCS") == "1":
            await page.screenshot(path=str(DOCS_SCREENSHOT), full_page=True)

        # A second page (the same browser, logged in) that stops following the journal
        # still offers the buttons.
        stale = await new_page(context, problems)
        await stale.goto(page.url)
        await stale.locator(f'.requests .request[data-request="{req.id}"] button.approve').wait_for()
        await stale.route("**/api/runs/**", lambda route: route.abort())

        # The name is required: without it nothing is decided.
        await page.fill("#approver", "")
        await card.locator("button.approve").click()
        assert "Enter your name" in await card.locator(".decision-error").inner_text()
        assert (await bridge.approvals.get(req.id)).state == "pending"

        # (Forged decisions, refused: test_web_login.py.)
        assert (await bridge.approvals.get(req.id)).state == "pending"
        assert ran == []

        await page.fill("#approver", "alice")
        await card.locator("input.reason").fill("checked the order")
        await card.locator("button.approve").click()
        assert await card.locator(".decision-done").inner_text() == "approved by alice via web"
        result = await asyncio.wait_for(task, WAIT)
        assert output(result) == {"big": {"result": {"refunded": 500}}}
        assert ran == [500]
        await page.locator(".summary .pill.completed").wait_for()
        decided_line = page.locator(f'li.request.approved[data-request="{req.id}"]')
        assert "approved by alice via web" in await decided_line.inner_text()
        assert "checked the order" in await decided_line.inner_text()
        decided = await bridge.approvals.get(req.id)
        assert (decided.decided_by, decided.channel, decided.reason) == ("alice", "web", "checked the order")

        # The stale page's person approves too late, and is told how it was decided.
        stale_card = stale.locator(f'.requests .request[data-request="{req.id}"]')
        await stale.fill("#approver", "bob")
        await stale_card.locator("button.approve").click()
        said_text = await stale_card.locator(".decision-error").inner_text()
        assert "already decided: approved by alice via web" in said_text
        assert (await bridge.approvals.get(req.id)).decided_by == "alice"
        assert ran == [500]
    # The stale page's aborted polls are the only errors any page logged.
    assert all("Failed to load resource" in problem or "api/runs" in problem for problem in problems), (
        problems
    )
