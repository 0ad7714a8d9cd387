"""What a person sees of a run, as data: shared by the web view and ``toolbridge trace``.

A step's ``attempt_log`` mixes three kinds of entries, told apart here once: attempts
(``{"attempt": n, ...}``, with an ``output_error`` when the result failed its output schema),
lifecycle hooks (``{"hook": "on_start", ...}``) and the windows of a wait
(``{"window": n, ...}``, one per ``wait_window`` that passed without the event); and the
changes the step made to the run's state (``{"state": {key: {"value": ...}}}``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from typing import Any

from toolbridge._journal.approvals import ApprovalRequest
from toolbridge._journal.trace import TraceNode, build_tree, request_to_dict, run_to_dict
from toolbridge._records import RunSummary, StepRecord

__all__ = ["as_shown", "entry_view", "error_text", "run_summary_view", "run_view", "step_marker"]


def as_shown(run: RunSummary, *, now: float | None = None) -> RunSummary:
    """The run as a person should see it: ``interrupted`` if its daemon is gone.

    The journal says ``running`` until a daemon finishes the run, so a daemon killed mid-run
    leaves it ``running`` forever. An open run's holder renews its lease; once the lease has
    run out with nobody renewing it, the run is not running but interrupted (entering it
    again replays it). A run with no lease (left by its bridge, or from an older journal)
    is shown as the journal says.
    """
    lease = run.lease_expires_at
    if (
        run.status in ("running", "waiting")
        and lease is not None
        and lease < (time.time() if now is None else now)
    ):
        return dataclasses.replace(run, status="interrupted")
    return run


def error_text(error: dict[str, Any] | None) -> str:
    """``Type: message`` for a recorded error; the exception's own text for an unexpected one."""
    if not error:
        return ""
    return str(error.get("exception") or f"{error.get('type', 'Error')}: {error.get('message', '')}")


def _took(entry: dict[str, Any]) -> float | None:
    finished = entry.get("finished_at")
    started = entry.get("started_at")
    return None if finished is None or started is None else finished - started


def entry_view(entry: dict[str, Any]) -> dict[str, Any]:
    """One ``attempt_log`` entry as ``{kind, label, started_at, finished_at, duration, ...}``."""
    view: dict[str, Any] = {
        "started_at": entry.get("started_at"),
        "finished_at": entry.get("finished_at"),
        "duration": _took(entry),
    }
    error = entry.get("error") if isinstance(entry.get("error"), dict) else None
    if "hook" in entry:
        hook = str(entry["hook"])
        if error is not None:
            label, tone = f"{hook}: {error_text(error)}", "error"
        elif "input" in entry:
            label, tone = f"{hook}: changed the input to {json.dumps(entry['input'])}", "change"
        elif "tool_result" in entry:
            label, tone = f"{hook}: replaced the tool's result {json.dumps(entry['tool_result'])}", "change"
        else:
            label, tone = f"{hook}: kept it as it was", "plain"
        return {**view, "kind": "hook", "label": label, "tone": tone}
    if "approval" in entry:  # the request itself is shown under the call
        if view["started_at"] is None:  # recorded before waits had times: one instant
            view.update(started_at=entry.get("at"), finished_at=entry.get("at"), duration=None)
        label = "waits for a person's decision" if entry.get("waiting") else "waited for a person's decision"
        if entry.get("state") and not entry.get("waiting"):
            label += f": {entry['state']}"
        return {**view, "kind": "approval", "label": label, "tone": "wait"}
    if "state" in entry and isinstance(entry["state"], dict):
        shown = ", ".join(
            f"{key} deleted" if change.get("deleted") else f"{key}={json.dumps(change.get('value'))}"
            for key, change in entry["state"].items()
        )
        return {**view, "kind": "state", "label": f"state: {shown}", "tone": "change"}
    if "confirmation" in entry:  # the verdict of a requires_confirmation callable
        verdict = "a person decides" if entry.get("required") else "not needed"
        failed = f" (it raised {entry['error']})" if entry.get("error") else ""
        return {
            **view,
            "kind": "confirmation",
            "label": f"requires_confirmation: {verdict}{failed}",
            "tone": "plain",
        }
    if "window" in entry:
        return {
            **view,
            "kind": "window",
            "label": f"wait window {entry['window']}: no event yet",
            "tone": "wait",
        }
    output_error = entry.get("output_error") if isinstance(entry.get("output_error"), dict) else None
    label = f"attempt {entry.get('attempt', '?')}"
    view.update(kind="attempt", label=label, tone="plain")
    if error is not None:
        view.update(tone="error", error=error_text(error), error_id=error.get("error_id") or "")
    if output_error is not None:
        view.update(
            tone="error",
            output_error=_reason(output_error),
            error_id=output_error.get("error_id") or view.get("error_id", ""),
        )
    return view


def _reason(output_error: dict[str, Any]) -> str:
    """Why a result failed its output schema: the exception's message, without its class name.

    The boundary records ``exception`` as ``"SchemaValidationError: /field: ..."``; journals
    written before it kept the reason alone under ``detail``.
    """
    if "detail" in output_error:
        return str(output_error["detail"])
    return str(output_error.get("exception", "")).partition(": ")[2]


def step_marker(step: StepRecord, *, run_finished: bool, cancelled: bool = False) -> str:
    """A word for what the step is doing now, beyond its status ("" when nothing to add)."""
    if step.stale:
        return "not asked for again"
    if step.status != "running":
        return ""
    if cancelled:
        return "cancelled"  # stopped by a person's cancel: its daemon could no longer record it
    if run_finished:
        return "interrupted"  # left running by a run that ended or crashed: a replay runs it again
    return {"wait_for_event": "waiting", "sleep": "sleeping"}.get(step.kind, "running")


def _node_view(node: TraceNode, *, run_finished: bool, cancelled: bool = False) -> dict[str, Any]:
    data = node.to_dict()
    data.pop("children")
    data["entries"] = [entry_view(entry) for entry in node.step.attempt_log]
    data["marker"] = step_marker(node.step, run_finished=run_finished, cancelled=cancelled)
    data["error_text"] = error_text(node.step.error)
    # What the page needs to decide a pending request, beside what the trace shows of it.
    data["approvals"] = [
        {
            **request_to_dict(req),
            "tool": req.tool,
            "arguments": req.arguments,
            "answer_schema": req.answer_schema,
            "expires_at": req.expires_at,
        }
        for req in node.approvals
    ]
    data["children"] = [
        _node_view(child, run_finished=run_finished, cancelled=cancelled) for child in node.children
    ]
    return data


def run_summary_view(run: RunSummary) -> dict[str, Any]:
    """A run as the list of runs shows it."""
    run = as_shown(run)
    return {**run_to_dict(run), "updated_at": run.updated_at}


def run_view(
    run: RunSummary, steps: list[StepRecord], requests: Sequence[ApprovalRequest] = ()
) -> dict[str, Any]:
    """A run and its steps as a tree, each step with its classified entries, marker and the
    requests for a person's decision it made."""
    run = as_shown(run)
    finished = run.status not in ("running", "waiting")
    return {
        **run_summary_view(run),
        "tree": [
            _node_view(node, run_finished=finished, cancelled=run.status == "cancelled")
            for node in build_tree(steps, requests)
        ],
    }
