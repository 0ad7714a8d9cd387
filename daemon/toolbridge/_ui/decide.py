"""Deciding requests from the web view: ``POST /api/approvals/{id}``, through ``Approvals``.

A decision is a write nobody but the person who logged in may make, so every ``POST`` must
come with the session the login opened (``login.py``: the cookie, checked before this runs),
carry that session's form token (embedded in the pages served to it) in the
``X-Toolbridge-Token`` header, name this server in its ``Origin`` header (a browser always
sends one on a ``POST``; a request without one is not from a page of ours) and have a JSON
body (which a cross-origin form cannot send without a preflight). Only the same ``Approvals``
API the CLI uses decides, over the same journal, as channel ``web``; the approver's name is
required.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from toolbridge._calls.decisions import Approvals
from toolbridge._errors import ApprovalError
from toolbridge._journal.approvals import ApprovalRequest
from toolbridge._ui.login import SESSION_STATE_KEY, Login

__all__ = ["TOKEN_HEADER", "Action", "Decisions", "forged", "pending_view", "read_action", "refuse"]

TOKEN_HEADER = "x-toolbridge-token"
MAX_BODY = 64 * 1024
MAX_NAME = 200


def pending_view(req: ApprovalRequest) -> dict[str, Any]:
    """A pending request as the pages show it, with what a person needs to decide it."""
    return {
        "id": req.id,
        "kind": req.kind,
        "state": req.state,
        "run_id": req.run_id,
        "step_key": req.step_key,
        "tool": req.tool,
        "summary": req.summary,
        "arguments": req.arguments,
        "answer_schema": req.answer_schema,
        "asked_at": req.created_at,
        "expires_at": req.expires_at,
    }


def refuse(status: int, message: str) -> Response:
    """The answer to an action refused: ``{"error": message}``, which the page shows."""
    return JSONResponse({"error": message}, status_code=status)


def forged(request: Request, login: Login) -> str | None:
    """Why ``request`` cannot be an action taken on one of our pages by the person logged in
    (``None``: it can)."""
    session = request.scope.get("state", {}).get(SESSION_STATE_KEY)
    if not isinstance(session, str):
        return "log in first: open the URL with ?token= that `toolbridge ui` printed"
    sent = request.headers.get(TOKEN_HEADER, "")
    if not secrets.compare_digest(sent.encode(), login.form_token(session).encode()):
        return "missing or wrong token: act from the page this server served"
    origin = request.headers.get("origin")
    if origin is None:
        return "no Origin header: an action must come from this server's page in a browser"
    if origin != f"{request.url.scheme}://{request.headers.get('host', '')}":
        return f"an action from another origin ({origin}) is refused"
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        return "an action must be a JSON body (content-type: application/json)"
    return None


@dataclass(frozen=True)
class Action:
    """A person's ``POST`` on one of our pages, checked: its JSON body, who acts and why."""

    body: dict[str, Any]
    by: str
    reason: str | None


async def read_action(request: Request, login: Login, *, noun: str, verb: str) -> Action | Response:
    """The action ``request`` asks for (``noun``: "a decision"), checked as every action is:
    from one of our pages by the person logged in, at most ``MAX_BODY`` bytes, a JSON object
    naming who ``verb`` ("decides") in 1 to ``MAX_NAME`` characters and, if it says, why. A
    refusal is returned as the response to send."""
    why = forged(request, login)
    if why is not None:
        return refuse(403, why)
    raw = await request.body()
    if len(raw) > MAX_BODY:
        return refuse(413, f"{noun} is at most {MAX_BODY} bytes")
    try:
        body = json.loads(raw)
    except ValueError:
        return refuse(400, "the body is not JSON")
    if not isinstance(body, dict):
        return refuse(400, "the body must be a JSON object")
    by, reason = body.get("by"), body.get("reason") or None
    if not isinstance(by, str) or not by.strip() or len(by) > MAX_NAME:
        return refuse(400, f"say who {verb}: a name of 1 to {MAX_NAME} characters")
    if reason is not None and not isinstance(reason, str):
        return refuse(400, "reason must be text")
    return Action(body, by.strip(), reason)


class Decisions:
    """The check of a ``POST`` and the decision it asks for."""

    def __init__(self, approvals: Approvals, login: Login) -> None:
        self.approvals = approvals
        self._login = login

    async def post(self, request: Request) -> Response:
        action = await read_action(request, self._login, noun="a decision", verb="decides")
        if isinstance(action, Response):
            return action
        body, by, reason = action.body, action.by, action.reason
        request_id = request.path_params["request_id"]
        try:
            asked = body.get("action")
            if asked == "approve":
                decided = await self.approvals.approve(request_id, by=by, reason=reason)
            elif asked == "reject":
                if reason is None:
                    return refuse(400, "say why it is rejected: the reason is shown to the sandbox")
                decided = await self.approvals.reject(request_id, by=by, reason=reason)
            elif asked == "answer":
                if "answer" not in body:
                    return refuse(400, "an answer is needed")
                decided = await self.approvals.answer(request_id, body["answer"], by=by)
            else:
                return refuse(400, "action must be approve, reject or answer")
        except ApprovalError as exc:
            # Unknown, already decided, expired or an invalid answer: the page shows why.
            return refuse(404 if exc.request is None else 409, str(exc))
        return JSONResponse(decided.to_dict())

    async def pending(self, request: Request) -> Response:
        return JSONResponse([pending_view(req) for req in await self.approvals.list()])
