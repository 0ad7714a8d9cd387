"""Finding runs and tools in the web view: ``/api/runs`` (search, filters, keyset pages),
``/api/tools/{name}`` (a tool's calls, error rate and latency), and cancelling a run.

A run a sidecar token records into has no end of its own (the sandbox elsewhere may call
again while the token lives), so it is shown by its token's state, not as ``running``.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from toolbridge._journal.base import Journal
from toolbridge._journal.runquery import STATUSES, RunQuery, ToolCall
from toolbridge._records import RunSummary, SidecarToken, now
from toolbridge._ui.decide import read_action, refuse
from toolbridge._ui.login import Login
from toolbridge._ui.view import error_text, run_summary_view

__all__ = ["MAX_RUNS", "TOOL_WINDOW", "Finding", "token_view"]

MAX_RUNS = 200
"""The most runs one page lists."""

TOOL_WINDOW = 1000
"""The per-tool page's error rate and latencies are over this many latest calls."""

_TIME_HELP = "a time: seconds since the epoch or ISO 8601 (2026-12-04T18:00)"


def _time(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        pass
    stamp = datetime.datetime.fromisoformat(text)
    if stamp.tzinfo is None:  # what a datetime-local field sends: the person's local time
        stamp = stamp.astimezone()
    return stamp.timestamp()


def cursor_of(run: RunSummary) -> str:
    """The ``after`` of the page following ``run``: its start (ms) and id."""
    return f"{round(run.started_at * 1000)}~{run.run_id}"


def _parse_cursor(text: str) -> tuple[float, str]:
    ms, sep, run_id = text.partition("~")
    if not sep or not ms.isdigit() or not run_id:
        raise ValueError("after must be the next value a page gave")
    return int(ms) / 1000, run_id


def parse_query(params: Any) -> RunQuery:
    """A :class:`RunQuery` from ``/api/runs``'s query string.

    Raises:
        ValueError: naming the parameter and what it takes.
    """
    try:
        limit = min(max(int(params.get("limit", "50")), 1), MAX_RUNS)
    except ValueError:
        raise ValueError("limit must be a whole number") from None
    status = params.get("status") or None
    if status is not None and status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}")
    times: dict[str, float | None] = {}
    for name in ("since", "until"):
        text = params.get(name) or None
        try:
            times[name] = None if text is None else _time(text)
        except ValueError:
            raise ValueError(f"{name} must be {_TIME_HELP}") from None
    after = params.get("after") or None
    search = (params.get("q") or "").strip() or None
    tool = (params.get("tool") or "").strip() or None
    if search is not None and len(search) > 200:
        raise ValueError("q is at most 200 characters (a run id is)")
    return RunQuery(
        search=search,
        status=status,
        tool=tool,
        since=times["since"],
        until=times["until"],
        after=None if after is None else _parse_cursor(after),
        limit=limit,
    )


def token_state(token: SidecarToken, at: float) -> str:
    """``active``, ``revoked``, ``expired`` or ``used up``."""
    if token.revoked_at is not None:
        return "revoked"
    if at >= token.expires_at:
        return "expired"
    if token.calls >= token.max_calls:
        return "used up"
    return "active"


def token_view(token: SidecarToken, at: float) -> dict[str, Any]:
    return {
        "id": token.id,
        "state": token_state(token, at),
        "calls": token.calls,
        "max_calls": token.max_calls,
        "tools": list(token.tools),
        "expires_at": token.expires_at,
        "revoked_at": token.revoked_at,
    }


def with_token(view: dict[str, Any], tokens: Sequence[SidecarToken], at: float) -> dict[str, Any]:
    """``view`` of a run a sidecar token records into, shown by that token's state.

    Such a run has no end of its own: the journal says ``running`` while a daemon serves the
    token (``interrupted`` once none does), or ``completed`` between two of its calls, and
    a later call may reopen it. What a person needs is whether it can go on: the newest
    token's state says so. A failed or cancelled run is shown as that.
    """
    mine = [token for token in tokens if token.run_id == view["run_id"]]
    if not mine or view["status"] in ("failed", "cancelled"):
        return view
    newest = max(mine, key=lambda token: token.created_at)
    token = token_view(newest, at)
    return {**view, "token": token, "status": f"token {token['state']}"}


def _percentile(sorted_ms: list[float], fraction: float) -> float | None:
    if not sorted_ms:
        return None
    index = min(len(sorted_ms) - 1, max(0, math.ceil(fraction * len(sorted_ms)) - 1))
    return sorted_ms[index]


def tool_view(name: str, calls: list[ToolCall]) -> dict[str, Any]:
    """What the per-tool page shows of ``name``'s latest ``calls`` (newest first)."""
    finished = [call for call in calls if call.finished_at is not None]
    failed = [call for call in finished if call.status == "failed"]
    took = sorted((call.finished_at or 0) - call.started_at for call in finished)
    return {
        "tool": name,
        "window": TOOL_WINDOW,
        "calls": len(calls),
        "finished": len(finished),
        "failed": len(failed),
        "running": len(calls) - len(finished),
        "error_rate": (len(failed) / len(finished)) if finished else None,
        "p50": _percentile(took, 0.5),
        "p99": _percentile(took, 0.99),
        "last_call_at": calls[0].started_at if calls else None,
        "last_errors": [
            {
                "run_id": call.run_id,
                "step_key": call.step_key,
                "at": call.finished_at,
                "error": error_text(call.error),
                "error_id": (call.error or {}).get("error_id") or "",
            }
            for call in failed[:10]
        ],
    }


class Finding:
    """The handlers of the run list, the tool page and the cancel action."""

    def __init__(self, journal: Journal, login: Login) -> None:
        self._journal = journal
        self._login = login

    async def runs(self, request: Request) -> Response:
        try:
            query = parse_query(request.query_params)
        except ValueError as exc:
            return refuse(400, str(exc))
        found = await self._journal.find_runs(query)
        tokens = await self._journal.list_tokens()
        at = now()
        return JSONResponse(
            {
                "runs": [with_token(run_summary_view(run), tokens, at) for run in found],
                "next": cursor_of(found[-1]) if len(found) == query.limit else None,
            }
        )

    async def tool(self, request: Request) -> Response:
        name = request.path_params["name"]
        calls = await self._journal.tool_calls(name, limit=TOOL_WINDOW)
        return JSONResponse(tool_view(name, calls))

    async def cancel(self, request: Request) -> Response:
        action = await read_action(request, self._login, noun="a cancel", verb="cancels")
        if isinstance(action, Response):
            return action
        by, reason = action.by, action.reason
        run_id = request.path_params["run_id"]
        run = await self._journal.get_run(run_id)
        if run is None:
            return refuse(404, f"no run {run_id!r} in this journal")
        if not await self._journal.cancel_run(run_id, by=by, channel="web", reason=reason):
            return refuse(409, f"run {run_id!r} is {run.status}: only a running or waiting run is cancelled")
        cancelled = await self._journal.get_run(run_id)
        assert cancelled is not None
        return JSONResponse(run_summary_view(cancelled))
