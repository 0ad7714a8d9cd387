"""Who may use the web view: a person who opened the login URL, as Jupyter does.

The server makes one random login token when it starts and shows it to whoever started it
only (``toolbridge ui`` prints the URL; ``bridge.serve_ui()`` yields it): it lives in this
process's memory, never in an environment, a file or an argument a sandbox could be handed.
Opening ``/?token=...`` spends it (it works once) and sets a session cookie (``HttpOnly``,
``SameSite=Strict``, scoped to this server by a random name, since a cookie is not scoped to
a port). Every page and API answer needs that session; only the static CSS, JS and icon do
not. A decision also needs the session's own form token (``X-Toolbridge-Token``, in the
pages served to that session) and an ``Origin`` naming this server (``decide.py``).

What this cannot stop: a process of the same user that reads this process's memory (where
``ptrace`` is allowed), or the browser's cookie store; see the guide's threat model.
"""

from __future__ import annotations

import hmac
import secrets
from hashlib import sha256
from http.cookies import SimpleCookie
from urllib.parse import parse_qs

from starlette.datastructures import Headers
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["SESSION_STATE_KEY", "Login", "RequireLogin"]

SESSION_STATE_KEY = "toolbridge_session"
"""Where the request's session id is left on the ASGI scope's state."""

PUBLIC_PREFIX = "/static/"
"""Files anybody may fetch: they hold no journal data."""


class Login:
    """One server's login token and the sessions it opened."""

    def __init__(self) -> None:
        self.token = secrets.token_urlsafe(32)
        self._spent = False
        self._key = secrets.token_bytes(32)
        self._sessions: set[str] = set()
        # Cookies are shared by every port of a host: a name of our own keeps two views apart.
        self.cookie_name = f"toolbridge_session_{secrets.token_hex(4)}"

    def spend(self, offered: str) -> str | None:
        """A new session id if ``offered`` is the login token not yet used (``None``: refused)."""
        if self._spent or not secrets.compare_digest(offered.encode(), self.token.encode()):
            return None
        self._spent = True
        session = secrets.token_urlsafe(32)
        self._sessions.add(session)
        return session

    def session_of(self, headers: Headers) -> str | None:
        """The request's session id, if its cookie names one this server opened."""
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header opens nothing
            return None
        morsel = cookie.get(self.cookie_name)
        if morsel is None:
            return None
        sent = morsel.value.encode()
        return next((s for s in self._sessions if secrets.compare_digest(sent, s.encode())), None)

    def form_token(self, session: str) -> str:
        """The token the pages of ``session`` send back with a decision."""
        return hmac.new(self._key, session.encode(), sha256).hexdigest()


def _refused(scope: Scope, message: str) -> Response:
    if str(scope.get("path", "")).startswith("/api/"):
        return JSONResponse({"error": message}, status_code=401)
    return PlainTextResponse(message, status_code=401)


class RequireLogin:
    """ASGI middleware: opens a session from the login URL, and refuses requests without one."""

    def __init__(self, app: ASGIApp, login: Login) -> None:
        self._app = app
        self._login = login

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or str(scope["path"]).startswith(PUBLIC_PREFIX):
            await self._app(scope, receive, send)
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if "token" in query and scope["method"] == "GET":
            session = self._login.spend(query["token"][0])
            if session is None:
                response: Response = _refused(
                    scope,
                    "this login link was already used or is wrong: start `toolbridge ui` again "
                    "for a new one (the link logs in one browser, once)",
                )
            else:
                # The token leaves the address bar (and the history) at once.
                response = RedirectResponse(str(scope["path"]) or "/", status_code=303)
                response.set_cookie(
                    self._login.cookie_name, session, httponly=True, samesite="strict", path="/"
                )
            await response(scope, receive, send)
            return
        session = self._login.session_of(Headers(scope=scope))
        if session is None:
            response = _refused(
                scope,
                "log in first: open the URL with ?token= that `toolbridge ui` printed "
                "(or that bridge.serve_ui() gave)",
            )
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})[SESSION_STATE_KEY] = session
        await self._app(scope, receive, send)
