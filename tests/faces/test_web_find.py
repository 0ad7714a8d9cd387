"""Finding things in the web view, in headless Chromium: runs by id, status, tool and time,
page after page; a tool's page (calls, error rate, latency, last errors); JSON folded with
copy buttons; and a sidecar token's run shown by its token's state. Each page's screenshot is
written to docs/img/ when TOOLBRIDGE_UPDATE_DOCS=1."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tests.faces.conftest import REPO, log_in, open_url
from tests.faces.test_web_view import browser, new_page  # noqa: F401 (the fixture)
from tests.helpers import client_elsewhere
from toolbridge import Bridge, ToolError

DOCS_IMG = REPO / "docs" / "img"
DAY = 24 * 3600.0


async def shoot(page: Any, name: str, tmp_path: Path) -> None:
    await page.screenshot(path=str(tmp_path / name), full_page=True)
    if os.environ.get("TOOLBRIDGE_UPDATE_DOCS") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(DOCS_IMG / name), full_page=True)


def add_old_runs(journal: Path, count: int, *, started: float) -> None:
    """``count`` completed runs ``bulk-0000``... one second apart from ``started``, each with a
    ``lookup`` call, written straight into the (already migrated) journal file."""
    runs, steps = [], []
    for i in range(count):
        at = round((started + i) * 1000)
        run_id = f"bulk-{i:04d}"
        runs.append((run_id, "completed", at, at + 5, at + 5, 1, None, None, None, 1))
        step = (run_id, "lookup#0", None, 1, "tool", "lookup", f"tbk_{i}", "completed", '{"sku":"x"}')
        steps.append((*step, '{"ok":true}', None, 1, "[]", at + 1, at + 4, 0))
    with sqlite3.connect(journal) as db:
        db.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", runs)
        db.executemany(f"INSERT INTO steps VALUES ({', '.join('?' * 16)})", steps)


def lookup(sku: str) -> dict[str, Any]:
    return {"sku": sku, "stock": 7}


def refuse(sku: str) -> None:
    raise ToolError(f"no warehouse stocks {sku}", type="UnknownWarehouse")


async def test_a_person_finds_runs_by_id_status_tool_and_time_page_by_page(
    browser: Any,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    problems: list[str] = []
    journal = tmp_path / "runs.db"
    tools = {"lookup": lookup, "refuse": refuse}
    async with Bridge(journal=journal, tools=tools) as bridge:
        add_old_runs(journal, 130, started=time.time() - 3 * DAY)
        await bridge.call_tool("lookup", ["a1"], run_id="order-1")
        with pytest.raises(ToolError):
            await bridge.call_tool("refuse", ["b2"], run_id="order-2")
        async with bridge.serve_ui(port=0) as login_url:
            page = await new_page(browser, problems)
            await page.goto(login_url)
            rows = page.locator("#runs tbody tr")
            await page.locator('tr[data-run="order-2"]').wait_for()
            assert await rows.count() == 50  # one page
            assert await rows.first.get_attribute("data-run") == "order-2"  # newest first

            # By id: a part of it is enough.
            await page.fill("#q", "der-2")
            await page.click("#find")
            await page.locator('#runs tbody tr[data-run="order-2"]:only-child').wait_for()
            assert "q=der-2" in page.url  # the search can be shared, or reloaded
            await shoot(page, "runs-search.png", tmp_path)

            # By status: a failed call fails its run (a run of its own, from call_tool).
            await page.fill("#q", "")
            await page.select_option("#status", "failed")
            await page.locator('#runs tbody tr[data-run="order-2"]:only-child').wait_for()
            assert await page.locator("#runs tbody tr .pill.failed").count() == 1

            # By the tool it called.
            await page.select_option("#status", "")
            await page.fill("#tool", "refuse")
            await page.click("#find")
            await page.locator('#runs tbody tr[data-run="order-2"]:only-child').wait_for()
            await page.fill("#tool", "lookup")
            await page.click("#find")
            await page.locator('#runs tbody tr[data-run="order-1"]').wait_for()
            await page.locator('#runs tbody tr[data-run="bulk-0129"]').wait_for()
            assert await page.locator('#runs tbody tr[data-run="order-2"]').count() == 0

            # By time, page after page: the runs of two days ago, 50 a page.
            await page.fill("#tool", "")
            await page.fill("#until", time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - DAY)))
            await page.click("#find")
            await page.locator('#runs tbody tr[data-run="bulk-0129"]:first-child').wait_for()
            assert await rows.count() == 50
            assert await page.locator("#newer").is_disabled()
            seen = await rows.evaluate_all("rows => rows.map(row => row.dataset.run)")
            await page.click("#older")
            await page.locator('#runs tbody tr[data-run="bulk-0079"]:first-child').wait_for()
            seen += await rows.evaluate_all("rows => rows.map(row => row.dataset.run)")
            await page.click("#older")
            await page.locator('#runs tbody tr[data-run="bulk-0029"]:first-child').wait_for()
            seen += await rows.evaluate_all("rows => rows.map(row => row.dataset.run)")
            assert seen == [f"bulk-{i:04d}" for i in range(129, -1, -1)]  # each once, in order
            assert await page.locator("#older").is_disabled()
            assert await page.locator("#page-info").inner_text() == "page 3"
            await shoot(page, "runs-pages.png", tmp_path)
            await page.click("#newer")
            await page.locator('#runs tbody tr[data-run="bulk-0079"]:first-child').wait_for()

            # A filter nothing matches says so.
            await page.fill("#q", "no-such-run")
            await page.click("#find")
            await page.locator("#empty:visible").wait_for()
            assert await page.locator("#empty").inner_text() == "No runs match."
    assert problems == []


async def test_bad_filters_are_refused_with_what_to_send(tmp_path: Path) -> None:
    async with Bridge(journal=tmp_path / "j.db") as bridge, bridge.serve_ui(port=0) as login_url:
        base, cookie = await asyncio.to_thread(log_in, login_url)
        for query, said in (
            ("status=sleeping", "status must be one of running, waiting"),
            ("since=yesterday", "since must be a time"),
            ("after=nonsense", "after must be the next value a page gave"),
            ("limit=many", "limit must be a whole number"),
            ("q=" + "x" * 201, "q is at most 200 characters"),
        ):
            url = f"{base}api/runs?{query}"
            status, _, body = await asyncio.to_thread(open_url, url, headers={"cookie": cookie})
            assert status == 400, query
            assert said in json.loads(body)["error"]


async def test_a_tools_page_shows_its_calls_error_rate_latency_and_last_errors(
    browser: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    problems: list[str] = []
    seen: list[int] = []

    def flaky(n: int) -> int:
        seen.append(n)
        if n % 4 == 0:
            raise ToolError(f"bin {n} is empty", type="EmptyBin")
        return n

    async with Bridge(journal=tmp_path / "tools.db", tools={"flaky": flaky}) as bridge:
        for n in range(1, 13):  # 12 calls, 3 fail (4, 8 and 12)
            with contextlib.suppress(ToolError):
                await bridge.call_tool("flaky", [n], run_id=f"pick-{n:02d}")
        async with bridge.serve_ui(port=0) as login_url:
            page = await new_page(browser, problems)
            await page.goto(login_url)
            await page.goto(login_url.split("?")[0] + "runs/pick-04")
            # A tool call's name links to its tool's page.
            await page.locator('li.step a.name:text-is("flaky")').click()
            await page.wait_for_url("**/tools/flaky")
            fact = page.locator("dd[data-fact]")
            await page.locator('dd[data-fact="calls"]').wait_for()
            facts = dict(
                zip(
                    await fact.evaluate_all("dds => dds.map(dd => dd.dataset.fact)"),
                    await fact.all_inner_texts(),
                    strict=True,
                )
            )
            assert (facts["calls"], facts["failed"], facts["error rate"], facts["running"]) == (
                "12",
                "3",
                "25.0 %",
                "0",
            )
            assert facts["p50"].endswith(" ms")
            assert facts["p99"].endswith(" ms")
            errors = page.locator("#errors tbody tr")
            assert await errors.evaluate_all("rows => rows.map(row => row.dataset.run)") == [
                "pick-12",
                "pick-08",
                "pick-04",
            ]
            assert "EmptyBin: bin 12 is empty" in await errors.first.inner_text()
            await shoot(page, "tool-page.png", tmp_path)
            # Its runs, a click away.
            await page.locator('a:text("The runs that called it")').click()
            await page.locator('#runs tbody tr[data-run="pick-12"]').wait_for()
            assert await page.locator("#tool").input_value() == "flaky"
            assert await page.locator("#runs tbody tr").count() == 12
    assert seen == list(range(1, 13))
    assert problems == []


async def test_json_is_folded_until_opened_and_copied_whole(
    browser: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    problems: list[str] = []
    big = {"customer": "cus_1", "lines": [{"sku": f"sku-{i}", "qty": i} for i in range(40)]}
    async with Bridge(journal=tmp_path / "json.db", tools={"order": lambda order: order}) as bridge:
        await bridge.call_tool("order", [big], run_id="big-order")
        async with bridge.serve_ui(port=0) as login_url:
            context = await browser.new_context()
            await context.grant_permissions(["clipboard-read", "clipboard-write"])
            page = await new_page(context, problems)
            await page.goto(login_url)
            await page.goto(login_url.split("?")[0] + "runs/big-order")
            await page.locator("li.step button.toggle").click()
            opened = page.locator("li.row.open")
            folded = opened.locator("details.json")
            assert await folded.count() == 2  # input and output
            for i in range(2):
                assert await folded.nth(i).get_attribute("open") is None
            assert '"qty": 39' not in await opened.inner_text()
            # Copied whole, though folded.
            await folded.first.locator("button.copy").click()
            await folded.first.locator('button.copy:text("copied")').wait_for()
            assert json.loads(await page.evaluate("navigator.clipboard.readText()")) == [big]
            assert await folded.first.get_attribute("open") is None  # copying does not unfold
            await folded.nth(1).locator("summary").click()
            assert '"qty": 39' in await opened.inner_text()
            # Opened stays opened while the page follows the journal.
            await page.reload()
            await page.locator("li.step button.toggle").click()
            await shoot(page, "run-json.png", tmp_path)
            await context.close()
    assert problems == []


CLIENT = """
import asyncio, json, sys
from inngest_tools import tools

async def main():
    print(json.dumps(await tools.lookup("sku-1")))

asyncio.run(main())
"""


async def test_a_sidecar_tokens_run_is_shown_by_its_tokens_state(
    browser: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    problems: list[str] = []
    async with Bridge(journal=tmp_path / "side.db", tools={"lookup": lookup}) as bridge:
        minted = await bridge.mint_token(run_id="vm-7", tools=["lookup"], max_calls=5, ttl=600)
        assert minted.token is not None
        said = await client_elsewhere(tmp_path, CLIENT, "", bridge.address, minted.token, timeout=60)
        assert said == [{"sku": "sku-1", "stock": 7}]
        async with bridge.serve_ui(port=0) as login_url:
            page = await new_page(browser, problems)
            await page.goto(login_url)
            row = page.locator('tr[data-run="vm-7"]')
            # Not "running" for ever: the run lives as long as its token.
            await row.locator(".pill.token.active").wait_for()
            assert await row.locator(".pill").inner_text() == "token active"
            await row.locator("a").click()
            line = page.locator(".token-state")
            await line.wait_for()
            assert f"sidecar token {minted.id} is active until" in await line.inner_text()
            assert "1 of 5 calls made" in await line.inner_text()
            await shoot(page, "run-sidecar-token.png", tmp_path)
            assert await bridge.revoke_token(minted.id)
            await page.locator(".summary .pill.token.revoked").wait_for()
            assert "was revoked at" in await line.inner_text()
            assert await page.locator("#cancel").is_hidden()  # a token's run is ended by revoking
            await page.goto(login_url.split("?")[0])
            await row.locator(".pill.token.revoked").wait_for()
    assert problems == []
