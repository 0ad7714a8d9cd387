"""A call that waits on a person, seen from an MCP client: how to decide it, and elicitation.

While a call runs, its run's pending requests are looked at every :data:`WATCH_INTERVAL`
seconds (a call that finishes sooner never looks). Each new one is announced in a progress
notification saying how to decide it: the ``toolbridge approvals`` command, and the web page
when ``TOOLBRIDGE_UI_URL`` names a running ``toolbridge ui``. Where the client offers
elicitation, the call answers ``input_required`` (MCP's multi-round requests) with a form per
request; the client retries with the person's answers and the run's id in ``request_state``,
so the retry joins the call still running (a client of the 2025 handshake protocol is sent
``elicitation/create`` while the call waits instead): accept approves (or answers), decline rejects,
cancel leaves the request to another channel. Whichever decides first wins; the others get
``ApprovalError`` and are ignored here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import urllib.parse
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolbridge import ApprovalError, ApprovalRequest, Bridge

__all__ = [
    "DECIDER",
    "UI_URL_ENV",
    "WATCH_INTERVAL",
    "apply_responses",
    "elicitation_offered",
    "watch_requests",
]

WATCH_INTERVAL = 0.25
"""Seconds between two looks at a running call's run for requests waiting on a person."""

UI_URL_ENV = "TOOLBRIDGE_UI_URL"
"""The web view's URL (as ``toolbridge ui`` prints it), to name its page in the hint."""

DECIDER = "mcp client"
"""Who a decision made through elicitation is recorded as made by."""

_PLAIN = {"string", "number", "integer", "boolean"}


def how_to_decide(req: ApprovalRequest, bridge: Bridge) -> str:
    """``refund(...) waits for approval: toolbridge approvals approve ID --journal PATH, or ...``"""
    verb = "answer" if req.kind == "input" else "approve"
    journal = f" --journal {bridge.journal_location}" if bridge.journal_location else ""
    answer = " ANSWER" if req.kind == "input" else ""
    text = f"{req.summary} waits for a person: toolbridge approvals {verb} {req.id}{answer}{journal}"
    ui_url = os.environ.get(UI_URL_ENV)
    if ui_url:
        # Never the login token: this text goes to the client (often a model), not a person.
        base = urllib.parse.urlsplit(ui_url)._replace(query="", fragment="").geturl()
        text += f", or {base.rstrip('/')}/runs/{req.run_id}"
    return text


def elicitation_offered(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the client can be asked (it declared the elicitation capability)."""
    wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
    try:
        return bool(ctx.session.check_client_capability(wanted))
    except Exception:  # a transport without a client session to ask
        return False


def elicitation(req: ApprovalRequest, bridge: Bridge) -> types.ElicitRequest | None:
    """The form that asks the person for ``req`` (``None``: MCP's flat forms cannot ask it)."""
    if req.kind == "input":
        schema = req.answer_schema or {"type": "string"}
        if schema.get("type") not in _PLAIN:
            return None  # the CLI or the web page answers it
        requested: dict[str, Any] = {
            "type": "object",
            "properties": {"answer": {**schema, "title": "Answer"}},
            "required": ["answer"],
        }
    else:
        requested = {
            "type": "object",
            "properties": {"reason": {"type": "string", "title": "Reason (optional)"}},
        }
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=question(req, bridge), requested_schema=requested)
    )


def question(req: ApprovalRequest, bridge: Bridge) -> str:
    """What a person is asked: ``Approve refund(order_id="o1", amount=500)?``, then the CLI line
    as a hint (for deciding elsewhere, or later)."""
    summary = req.summary.rstrip()
    if req.kind == "input":
        asked = summary if summary.endswith("?") else f"{summary}?"
        verb = "answer"
    else:
        asked = f"Approve {summary.rstrip('?')}?"
        verb = "approve"
    journal = f" --journal {bridge.journal_location}" if bridge.journal_location else ""
    answer = " ANSWER" if req.kind == "input" else ""
    return f"{asked}\n\n(Or from a terminal: toolbridge approvals {verb} {req.id}{answer}{journal})"


async def apply_responses(bridge: Bridge, responses: dict[str, Any], *, run_id: str, tool: str) -> set[str]:
    """Decide the requests the client answered (keyed by request id); their ids.

    Accept approves (or answers), decline rejects, cancel leaves the request pending. Only a
    request of this call (its run, its tool) is decided: a client cannot decide others' by
    sending answers it was never asked for.
    """
    approvals = bridge.approvals.via("mcp")
    for request_id, response in responses.items():
        if not isinstance(response, types.ElicitResult):
            continue
        content = response.content or {}
        with contextlib.suppress(ApprovalError):  # decided elsewhere meanwhile, expired, unknown
            req = await approvals.get(request_id)
            if req.run_id != run_id or req.tool != tool:
                continue
            if response.action == "accept" and req.kind == "input":
                await approvals.answer(request_id, content.get("answer"), by=DECIDER)
            elif response.action == "accept":
                reason = content.get("reason")
                await approvals.approve(request_id, by=DECIDER, reason=str(reason) if reason else None)
            elif response.action == "decline":
                await approvals.reject(request_id, by=DECIDER, reason="declined in the MCP client")
    return set(responses)


async def watch_requests(
    ctx: ServerRequestContext[Any, Any],
    bridge: Bridge,
    work: asyncio.Future[Any],
    *,
    run_id: str,
    tool: str,
    asked: set[str],
    elicit: bool,
    interval: float = WATCH_INTERVAL,
) -> dict[str, types.ElicitRequest]:
    """Until ``work`` is done, announce each new request of ``run_id``'s ``tool`` calls; with
    ``elicit``, return the forms to ask the client (the call then answers ``input_required``).
    Requests in ``asked`` (the client answered them already) are not asked again."""
    announced = set(asked)
    # Multi-round results exist from the 2026 protocol on; before it, the server asks itself.
    modern = ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS
    asking: set[asyncio.Task[None]] = set()
    try:
        while not work.done():
            await asyncio.wait({work}, timeout=interval)
            if work.done():
                break
            forms: dict[str, types.ElicitRequest] = {}
            for req in await bridge.approvals.list(run_id):
                if req.id in announced or req.tool != tool:
                    continue
                announced.add(req.id)
                await ctx.session.report_progress(0, None, how_to_decide(req, bridge))
                form = elicitation(req, bridge) if elicit else None
                if form is not None and modern:
                    forms[req.id] = form
                elif form is not None:
                    asking.add(asyncio.create_task(_ask_now(ctx, bridge, req.id, form)))
            if forms:
                return forms
        return {}
    finally:
        for task in asking:  # the call ended (decided elsewhere): the prompt has no use now
            task.cancel()
        for task in asking:
            with contextlib.suppress(BaseException):
                await task


async def _ask_now(
    ctx: ServerRequestContext[Any, Any], bridge: Bridge, request_id: str, form: types.ElicitRequest
) -> None:
    params = form.params
    assert isinstance(params, types.ElicitRequestFormParams)
    result = await ctx.session.elicit(params.message, params.requested_schema)
    req = await bridge.approvals.get(request_id)
    await apply_responses(bridge, {request_id: result}, run_id=req.run_id, tool=req.tool)
