"""A decision needs a person's secret: the web view's one-time login, its session cookie, and
the attacks it stops (a forged POST with no Origin, the page's token without the login, and a
sandbox under the process launcher hunting its whole world for the login token)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tests.e2e.test_approvals import output, pending, refund_tool, start
from tests.faces.conftest import WAIT, log_in, open_url
from toolbridge import Bridge, CommandResult, tool

FORM_TOKEN = re.compile(r'<meta name="toolbridge-token" content="([^"]+)">')


def form_token(base: str, cookie: str) -> str:
    status, _, body = open_url(base, headers={"cookie": cookie})
    assert status == 200, status
    found = FORM_TOKEN.search(body.decode())
    assert found is not None
    return found.group(1)


def post(url: str, body: object, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    status, _, said = open_url(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json", **headers}
    )
    return status, json.loads(said)


async def test_the_login_url_works_once_and_its_cookie_is_http_only_and_strict(bridge: Bridge) -> None:
    async with bridge.serve_ui(port=0) as login_url:
        base, _, token = login_url.partition("?token=")
        assert base.startswith("http://127.0.0.1:")
        assert base.endswith("/")
        assert len(token) >= 40
        # Without the login nothing is served but the static files.
        for path in ("", "runs/x", "tools/x", "api/runs", "api/runs/x", "api/approvals"):
            status, _, _ = await asyncio.to_thread(open_url, base + path)
            assert status == 401, path
        assert (await asyncio.to_thread(open_url, base + "static/app.js"))[0] == 200
        status, _, said = await asyncio.to_thread(open_url, base + "?token=" + "x" * len(token))
        assert status == 401
        assert b"already used or is wrong" in said

        status, headers, _ = await asyncio.to_thread(open_url, login_url)
        assert status == 303
        assert headers["location"] == "/"  # the token leaves the address bar
        cookie = headers["set-cookie"]
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
        session = cookie.split(";")[0]
        assert session.startswith("toolbridge_session_")

        # Spent: the same link logs nobody else in.
        status, _, said = await asyncio.to_thread(open_url, login_url)
        assert status == 401
        assert b"already used" in said
        assert (await asyncio.to_thread(open_url, base, headers={"cookie": session}))[0] == 200
        name = session.partition("=")[0]
        forged = f"{name}={'A' * 43}"
        assert (await asyncio.to_thread(open_url, base + "api/runs", headers={"cookie": forged}))[0] == 401


async def test_a_forged_decision_is_refused(bridge: Bridge, script: Callable[[str, str], Path]) -> None:
    ran: list[int] = []
    task = start(bridge, script, {"refund": refund_tool(ran, requires_confirmation=True)}, [("big", 500)])
    (req,) = await pending(bridge)
    async with bridge.serve_ui(port=0) as login_url:
        base, cookie = await asyncio.to_thread(log_in, login_url)
        token = await asyncio.to_thread(form_token, base, cookie)
        origin = base.rstrip("/")
        where = f"{base}api/approvals/{req.id}"
        body = {"action": "approve", "by": "mallory"}
        # A POST with no Origin is not from a page in a browser: refused, even with the
        # session and its form token (a local process with a stolen cookie, say).
        no_origin = {"cookie": cookie, "x-toolbridge-token": token}
        status, said = await asyncio.to_thread(post, where, body, no_origin)
        assert (status, said["error"].startswith("no Origin header")) == (403, True)
        # The page's token without the login's session: refused.
        no_login = {"x-toolbridge-token": token, "origin": origin}
        status, said = await asyncio.to_thread(post, where, body, no_login)
        assert status == 401
        assert "log in first" in said["error"]
        # The session without the page's token, or from another origin: refused.
        for headers in (
            {"cookie": cookie, "origin": origin},
            {"cookie": cookie, "origin": origin, "x-toolbridge-token": "guess"},
            {"cookie": cookie, "origin": "http://evil.example", "x-toolbridge-token": token},
        ):
            status, said = await asyncio.to_thread(post, where, body, headers)
            assert status == 403, headers
        assert (await bridge.approvals.get(req.id)).state == "pending"
        assert ran == []

        every = {"cookie": cookie, "origin": origin, "x-toolbridge-token": token}
        status, said = await asyncio.to_thread(post, where, {"action": "approve", "by": "alice"}, every)
        assert status == 200, said
        assert (said["decided_by"], said["channel"]) == ("alice", "web")
    assert output(await asyncio.wait_for(task, WAIT)) == {"big": {"result": {"refunded": 500}}}


HUNTER = r"""
import asyncio, glob, json, os, re, sqlite3, sys, time, urllib.error, urllib.request
from pathlib import Path
from inngest_tools import ToolError, tools

BASE = sys.argv[1]
TOKENISH = re.compile(rb"[A-Za-z0-9_\-]{32,}")
META = re.compile(r'<meta name="toolbridge-token" content="([^"]+)">')


def read(path, limit=4 << 20):
    try:
        with open(path, "rb") as handle:
            return handle.read(limit)
    except OSError:
        return b""


def harvest():
    # Everything this sandbox is given or can read: its environment and arguments, every
    # file under its working folder, its open fds, and every process's environment and
    # command line that /proc shows it (the host's among them).
    blobs = [json.dumps(dict(os.environ)).encode(), " ".join(sys.argv).encode()]
    for root, _, files in os.walk(os.getcwd()):
        blobs += [read(os.path.join(root, name)) for name in files]
    for fd in os.listdir("/proc/self/fd"):
        blobs.append(read(f"/proc/self/fd/{fd}", 1 << 16) if os.path.isfile(f"/proc/self/fd/{fd}") else b"")
        try:
            blobs.append(os.readlink(f"/proc/self/fd/{fd}").encode())
        except OSError:
            pass
    for proc in glob.glob("/proc/[0-9]*"):
        blobs += [read(f"{proc}/environ"), read(f"{proc}/cmdline")]
    return {m.decode() for blob in blobs for m in TOKENISH.findall(blob)}


def http(url, data=None, headers=None):
    class Stay(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None
    request = urllib.request.Request(url, data=data, headers=headers or {}, method="POST" if data else "GET")
    try:
        with urllib.request.build_opener(Stay).open(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode(errors="replace")
    except OSError as exc:
        return 0, {}, str(exc)


def pending_ids():
    # The journal is readable here (same user): it names the request, not the login.
    db = sqlite3.connect(f"file:{os.path.join(os.getcwd(), 'journal.db')}?mode=ro", uri=True)
    try:
        return [row[0] for row in db.execute("SELECT request_id FROM approvals WHERE state = 'pending'")]
    finally:
        db.close()


def attack():
    deadline = time.monotonic() + 30
    while not (ids := pending_ids()) and time.monotonic() < deadline:
        time.sleep(0.05)
    candidates = harvest()
    status, _, page = http(BASE)
    found = META.search(page)
    if found:
        candidates.add(found.group(1))
    cookies = []
    for candidate in candidates:
        status, headers, _ = http(BASE + "?token=" + candidate)
        if status == 303 and "Set-Cookie" in headers:
            cookies.append(headers["Set-Cookie"].split(";")[0])
    decided = []
    origin = BASE.rstrip("/")
    tries = [{}, {"origin": origin}, *({"cookie": c, "origin": origin} for c in cookies)]
    for request_id in ids:
        for candidate in candidates or {"none"}:
            for extra in tries:
                headers = {"content-type": "application/json", "x-toolbridge-token": candidate, **extra}
                body = json.dumps({"action": "approve", "by": "the sandbox"}).encode()
                status, _, _ = http(f"{BASE}api/approvals/{request_id}", body, headers)
                if status == 200:
                    decided.append(request_id)
    return {"ids": ids, "candidates": len(candidates), "logged_in": len(cookies), "decided": decided}


async def main():
    refund = asyncio.ensure_future(tools.refund(order_id=42, amount=500))
    report = await asyncio.to_thread(attack)
    await tools.attacked(report=json.dumps(report))
    try:
        outcome = {"result": await refund}
    except ToolError as error:
        outcome = {"type": error.type, "message": error.message}
    print(json.dumps({"report": report, "refund": outcome}))

asyncio.run(main())
"""


class Report(BaseModel):
    report: str


async def test_a_sandbox_that_searches_its_world_for_the_login_cannot_approve_its_own_request(
    bridge: Bridge, script: Callable[[str, str], Path]
) -> None:
    # The process launcher runs the sandbox as the host's user, with loopback reachable: the
    # view's address is no secret (it is handed the base URL), the login token must be.
    ran: list[int] = []
    reported: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    def attacked(args: Report) -> str:
        reported.set_result(json.loads(args.report))
        return "ok"

    path = script("hunter.py", HUNTER)
    tools = {
        "refund": refund_tool(ran, requires_confirmation=True),
        "attacked": tool.step(description="the sandbox says it is done", input=Report, run=attacked),
    }
    async with bridge.serve_ui(port=0) as login_url:
        base = login_url.split("?")[0]

        async def go() -> CommandResult:
            async with bridge.run("hunt") as step:
                return await step.sandbox.commands.run(
                    "hunter", ["python3", str(path), base], tools=tools, cwd=path.parent
                )

        hunting = asyncio.create_task(go())
        report = await asyncio.wait_for(reported, WAIT)
        assert (report["logged_in"], report["decided"]) == (0, []), report
        assert report["candidates"] > 0  # it did search: tokens of other kinds are everywhere
        (req,) = await bridge.approvals.list()
        assert report["ids"] == [req.id], report
        assert (await bridge.approvals.get(req.id)).state == "pending"
        assert ran == []
        await bridge.approvals.approve(req.id, by="alice")
        result = output(await asyncio.wait_for(hunting, WAIT))
    assert result["refund"] == {"result": {"refunded": 500}}
    assert ran == [500]
