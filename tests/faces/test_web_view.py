"""The web view as a person uses it: `toolbridge ui` in a subprocess, pages loaded in headless
Chromium (Debian's, driven by Playwright: no browser download), and a run watched live while
a bridge in this process records it."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.faces.conftest import REPO, TOOLBRIDGE, WAIT, log_in, open_url, serving
from tests.faces.runs import record_runs
from toolbridge import Bridge, ToolbridgeError

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
REQUIRED = os.environ.get("TOOLBRIDGE_BROWSER_TESTS") == "1"
DOCS_SCREENSHOT = REPO / "docs" / "run-page.png"


@pytest.fixture
async def recorded(tmp_path: Path) -> Path:
    journal = tmp_path / "runs.db"
    await record_runs(journal)
    return journal


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        if REQUIRED:
            raise
        pytest.skip("playwright is not installed (pip install playwright)")
    if shutil.which(CHROMIUM) is None:
        if REQUIRED:
            pytest.fail(
                f"{CHROMIUM} is missing: run scripts/setup_system.sh as root (apt-get install chromium)"
            )
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium); make test installs it")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


async def new_page(browser: Any, problems: list[str]) -> Any:
    """A page in a new browser (a ``Browser``: no cookies) or in one already logged in (its
    ``BrowserContext``)."""
    page = await browser.new_page()
    await page.set_viewport_size({"width": 1280, "height": 900})
    page.set_default_timeout(WAIT * 1000)
    # A CSP violation or a script error is a page a person cannot use: collect them all.
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on(
        "request",
        lambda request: None if request.url.startswith("http://127.0.0.1:") else problems.append(request.url),
    )
    return page


def _get(url: str, cookie: str, host: str | None = None) -> tuple[int, dict[str, str], bytes]:
    return open_url(url, headers={"cookie": cookie, **({"host": host} if host else {})})


async def test_every_response_has_a_strict_csp_and_only_loopback_hosts_are_answered(recorded: Path) -> None:
    async for login_url, _ in serving(
        "ui", "--journal", str(recorded), "--port", "0", env=dict(os.environ), prefix="TOOLBRIDGE_UI_URL"
    ):
        assert login_url.startswith("http://127.0.0.1:")
        url, cookie = await asyncio.to_thread(log_in, login_url)
        for path in ("", "runs/order-42", "static/app.js", "static/app.css", "api/runs", "api/runs/order-42"):
            status, headers, _ = await asyncio.to_thread(_get, url + path, cookie)
            assert status == 200, path
            assert "default-src 'self'" in headers["content-security-policy"]
            assert "'unsafe-inline'" not in headers["content-security-policy"]
        status, _, body = await asyncio.to_thread(_get, url + "api/runs/no-such-run", cookie)
        assert status == 404
        assert b"no run" in body
        status, _, body = await asyncio.to_thread(_get, url + "api/runs?limit=many", cookie)
        assert status == 400
        assert b"limit must be a whole number" in body
        status, _, _ = await asyncio.to_thread(_get, url + "api/runs", cookie, "evil.example:80")
        assert status == 400, "a page elsewhere must not reach the view by DNS rebinding"
        html = (await asyncio.to_thread(_get, url, cookie))[2].decode()
        assert "<script>" not in html, "no inline script"
        assert "style=" not in html, "no inline style"


@pytest.mark.parametrize(
    ("args", "status", "said"),
    [
        (["--journal", "nope.db"], 1, "no journal at nope.db"),
        (["--journal", "postgresql://db/toolbridge"], 1, "PostgreSQL journal"),
        (["--journal", "nope.db", "--port", "70000"], 2, "--port must be from 0 to 65535"),
    ],
)
async def test_bad_options_are_refused_with_what_to_pass(
    tmp_path: Path, args: list[str], status: int, said: str
) -> None:
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE, "ui", *args, cwd=tmp_path, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == status
    assert said in err.decode()


async def test_serve_ui_refuses_a_bad_port_and_a_closed_bridge(tmp_path: Path) -> None:
    bridge = Bridge(journal=tmp_path / "j.db")
    with pytest.raises(ToolbridgeError, match="not open"):
        bridge.serve_ui()
    async with bridge:
        with pytest.raises(ValueError, match="port must be"):
            async with bridge.serve_ui(port=-1):
                pass


async def test_a_person_sees_the_runs_and_a_runs_waterfall(
    recorded: Path, browser: Any, tmp_path: Path
) -> None:
    problems: list[str] = []
    async for url, _ in serving(
        "ui", "--journal", str(recorded), "--port", "0", env=dict(os.environ), prefix="TOOLBRIDGE_UI_URL"
    ):
        page = await new_page(browser, problems)
        await page.goto(url)
        order = page.locator('tr[data-run="order-42"]')
        await order.locator(".pill.completed").wait_for()
        assert await page.locator('tr[data-run="refund-7"] .pill').inner_text() == "failed"
        assert (await order.locator("td").nth(4).inner_text()) == "8"  # steps
        await page.screenshot(path=str(tmp_path / "runs-page.png"))

        await order.locator("a").click()
        await page.locator("li.step").first.wait_for()
        assert await page.locator(".summary .pill").inner_text() == "completed"
        names = await page.locator("li.step .name").all_inner_texts()
        assert names == [
            "legacy-check",
            "reserve",
            "checkout",
            "lookup",
            "miscount",
            "flaky",
            "awaitPayment",
            "paid",
        ]
        # What went wrong is on the page without a click: the output-validation reason.
        reason = page.locator(".detail.reason pre")
        assert "/stock: Input should be a valid integer" in await reason.inner_text()
        assert (
            await page.locator('li.step[data-step="legacy-check"] .marker').inner_text()
            == "not asked for again"
        )
        assert await page.locator("li.entry.window").count() >= 1  # how many: timing decides
        assert "on_start: changed the input" in await page.locator("li.entry.hook").inner_text()
        assert await page.locator("li.entry.attempt.error").count() == 2  # miscount's, flaky's first
        # A step opens to show its input and output, each JSON folded to one line until opened.
        lookup = page.locator('li.step:has(.name:text-is("lookup"))')
        await lookup.locator("button.toggle").click()
        opened = page.locator("li.row.open").first
        assert '"sku": "a1"' not in await opened.inner_text()
        assert '{"sku":"a1"}' in await opened.locator("details.json .preview").first.inner_text()
        await opened.locator("details.json summary").first.click()
        assert '"sku": "a1"' in await opened.inner_text()
        await page.screenshot(path=str(tmp_path / "run-page.png"), full_page=True)
        if os.environ.get("TOOLBRIDGE_UPDATE_DOCS") == "1":
            DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
            await page.screenshot(path=str(DOCS_SCREENSHOT), full_page=True)
    assert problems == []


async def test_a_run_is_watched_live_until_it_ends(browser: Any, tmp_path: Path) -> None:
    problems: list[str] = []
    release = asyncio.Event()

    async def wait_for_release() -> str:
        await release.wait()
        return "shipped"

    async with Bridge(journal=tmp_path / "live.db") as bridge, bridge.serve_ui(port=0) as login_url:
        url = login_url.split("?")[0]
        async with bridge.run("live-1") as step:
            await step.run("prepare", lambda: "ready")
            shipping = asyncio.ensure_future(step.run("ship", wait_for_release))
            page = await new_page(browser, problems)
            await page.goto(login_url)
            await page.locator('tr[data-run="live-1"] .pill.running').wait_for()
            await page.locator(".live").wait_for()
            await page.goto(url + "runs/live-1")
            await page.locator('li.step[data-step="ship"] .marker.running').wait_for()
            release.set()
            assert await shipping == "shipped"
        # The page follows the run to its end, with no reload.
        await page.locator(".summary .pill.completed").wait_for()
        assert await page.locator('li.step[data-step="ship"] .marker').count() == 0
        assert await page.locator(".live").is_hidden()
    assert problems == []
