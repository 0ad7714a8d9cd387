"""The web view as an ASGI app: two static pages, their CSS and JS, and a JSON API.

The pages are static files rendered by ``app.js`` from ``/api/runs`` and
``/api/runs/{id}``, polled while a run goes on. Every response carries a strict
Content-Security-Policy (no inline script, ``default-src 'self'``): nothing is fetched from
anywhere else. Only loopback Host headers are answered, so a web page elsewhere cannot reach
the view through DNS rebinding.

Nothing but the static files is served without the session the login URL opens
(``login.py``). Pending requests are decided with ``POST /api/approvals/{id}`` (``decide.py``:
that session, its form token embedded in the pages, an ``Origin`` check and a JSON body),
through ``Approvals`` as channel ``web``, so the view's journal is opened for writing too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolbridge._calls.decisions import Approvals
from toolbridge._calls.hub import ApprovalHub
from toolbridge._records import now
from toolbridge._ui.decide import Decisions
from toolbridge._ui.finding import Finding, with_token
from toolbridge._ui.journal import Journal
from toolbridge._ui.login import SESSION_STATE_KEY, Login, RequireLogin
from toolbridge._ui.view import run_view

__all__ = ["CONTENT_SECURITY_POLICY", "ui_app"]

STATIC = Path(__file__).with_name("static")

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "[::1]", "::1"]
PAGES = ("runs.html", "run.html", "tool.html")


class SecurityHeaders:
    """Adds the CSP and its companions to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_HEADERS]
            await send(message)

        await self._app(scope, receive, send_with_headers)


def ui_app(journal: Journal, login: Login, *, approvals: Approvals | None = None) -> Starlette:
    """The web view of ``journal`` (already open; the caller closes it), entered through
    ``login``; decisions go through ``approvals`` (by default an ``Approvals`` over
    ``journal``, channel ``web``)."""
    decisions = Decisions(approvals or Approvals(ApprovalHub(journal), channel="web"), login)
    finding = Finding(journal, login)
    pages = {name: (STATIC / name).read_text() for name in PAGES}

    def page(name: str, request: Request) -> Response:
        # The session's form token goes in a <meta> tag (no inline script): app.js sends it back.
        token = login.form_token(request.scope["state"][SESSION_STATE_KEY])
        return HTMLResponse(pages[name].replace("{{token}}", token))

    async def runs_page(request: Request) -> Response:
        return page("runs.html", request)

    async def run_page(request: Request) -> Response:
        return page("run.html", request)

    async def tool_page(request: Request) -> Response:
        return page("tool.html", request)

    async def run_json(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        run = await journal.get_run(run_id)
        if run is None:
            return JSONResponse({"error": f"no run {run_id!r} in this journal"}, status_code=404)
        steps = await journal.load_steps(run_id)
        view = run_view(run, steps, await journal.approvals.list(run_id=run_id))
        return JSONResponse(with_token(view, await journal.list_tokens(), now()))

    routes: list[Any] = [
        Route("/", runs_page),
        Route("/runs/{run_id:path}", run_page),
        Route("/tools/{name}", tool_page),
        Route("/api/runs", finding.runs),
        Route("/api/runs/{run_id:path}/cancel", finding.cancel, methods=["POST"]),
        Route("/api/runs/{run_id:path}", run_json),
        Route("/api/tools/{name}", finding.tool),
        Route("/api/approvals", decisions.pending),
        Route("/api/approvals/{request_id}", decisions.post, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(TrustedHostMiddleware, allowed_hosts=LOOPBACK_HOSTS),
            Middleware(RequireLogin, login=login),
        ],
    )
