"""The decision point of a call: does it need a person, and waiting, durably, until one decides.

A call needs a person when its tool says ``requires_confirmation=True``, when its
``requires_confirmation(args, ctx)`` says so (or raises: fail closed), and always for the
built-in ``ask_user`` and ``request_approval``. The verdict of a callable is journaled in the
step's ``attempt_log``, so a replay never asks it again.

Such a call makes a request (a row of the journal's ``approvals`` table bound to its run, step
key and argument hash) and waits. The step is journaled before the wait with an entry saying
so, so that a host killed meanwhile finds the call on replay, and knows that the tool never
started. While the call waits, the command's clock is paused (``StopSignal.pause``) and the
sandbox's ``await`` stays blocked; after ``ToolOptions.approval_hold`` the command is stopped
and the run raises ``RunWaiting``.

A decision wakes the call through the bridge's :class:`~toolbridge._calls.hub.ApprovalHub`.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolbridge._calls.scope import CommandScope
from toolbridge._calls.secrets import masked, requested_input
from toolbridge._errors import ToolError
from toolbridge._journal.approvals import ApprovalRequest, RequestKind
from toolbridge._json import canonical, digest, dumps
from toolbridge._records import StepRecord, now
from toolbridge._tools.context import ToolContext
from toolbridge._tools.tool import BoundCall, Tool, call_maybe_async

__all__ = ["SUSPENDED", "Gate", "gate", "was_waiting"]

SUSPENDED = "RunWaiting"
"""The type of the error a call returns when its command was stopped while it waited."""

OnWaiting = Callable[[ApprovalRequest], None]
"""Told when a call starts to wait on a request (the server tells the client)."""


@dataclass(frozen=True)
class Gate:
    """What the decision point says about a call that needed a person.

    Exactly one is set: ``error`` (rejected or expired: the call fails with it, recorded),
    ``result`` (a built-in tool's answer, recorded as its result), or ``suspended`` (the
    command was stopped while the call waited: nothing is recorded, the step stays running).
    """

    error: ToolError | None = None
    result: str | None = None
    suspended: ToolError | None = None


def was_waiting(rec: StepRecord) -> bool:
    """Whether the step, as recorded, was waiting on a person: its tool never started."""
    entries = [entry for entry in rec.attempt_log if "approval" in entry]
    return bool(entries) and bool(entries[-1].get("waiting"))


async def gate(
    scope: CommandScope,
    tool: Tool,
    tool_name: str,
    rec: StepRecord,
    bound: BoundCall,
    on_waiting: OnWaiting | None = None,
) -> Gate | None:
    """Decide whether the call may run now; wait for a person if it needs one.

    Returns ``None`` when the tool may run (no confirmation needed, or approved).
    """
    kind: RequestKind
    if tool.human is not None:
        kind = tool.human.kind
    elif await _needs_confirmation(scope, tool, tool_name, rec, bound):
        kind = "approval"
    else:
        return None
    run, options = scope.run, scope.options
    kept = requested_input(tool, bound, run.secrets)  # secrets as keyed hashes
    arguments = masked(kept)  # what the person deciding is shown
    args_hash = digest(canonical(kept), 16)
    store = scope.approvals.store
    req = None
    for found in await store.for_step(run.run_id, rec.key):
        if found.args_hash == args_hash:
            req = found
        elif found.state == "pending":  # asked for other arguments (on_start changed them)
            await store.decide(found.decided("cancelled", by=None, channel="replay"), condition="any")
    if req is None:
        stamp = now()
        schema = tool.human.answer_schema if tool.human is not None else None
        req = await store.create(
            ApprovalRequest(
                id="apr_" + secrets.token_hex(8),
                run_id=run.run_id,
                step_key=rec.key,
                args_hash=args_hash,
                kind=kind,
                tool=tool_name,
                arguments=arguments,
                summary=_summary(tool, tool_name, arguments),
                answer_schema=None if schema is None else schema.json_schema,
                state="pending",
                created_at=stamp,
                expires_at=stamp + options.approval_timeout,
            )
        )
    # One entry per request, kept across the replays that find it still pending, so the trace
    # shows one wait, from the request to the decision.
    entry = next((e for e in rec.attempt_log if e.get("approval") == req.id), None)
    if entry is None:
        entry = {"approval": req.id, "kind": kind, "started_at": req.created_at, "at": now()}
        rec.attempt_log.append(entry)
    entry["waiting"] = req.state == "pending"
    if req.state == "pending":
        await run.journal.write(rec)  # on disk before the wait: a replay knows it never ran
        if on_waiting is not None:
            on_waiting(req)
        decided = await _wait(scope, req)
        if decided is None:
            return Gate(suspended=_suspended(scope, req))
        req = decided
    entry.update(
        waiting=False,
        state=req.state,
        decided_by=req.decided_by,
        channel=req.channel,
        finished_at=req.decided_at or now(),
    )
    await run.journal.write(rec)  # before the tool runs: an at-most-once tool is now started
    return _verdict(tool, req)


async def _needs_confirmation(
    scope: CommandScope, tool: Tool, tool_name: str, rec: StepRecord, bound: BoundCall
) -> bool:
    check = tool.requires_confirmation
    if isinstance(check, bool):
        return check
    for recorded in rec.attempt_log:  # asked before this replay: the journal keeps the verdict
        if "confirmation" in recorded:
            return bool(recorded["required"])
    entry: dict[str, Any] = {"confirmation": "requires_confirmation", "at": now()}
    context = ToolContext(
        run_id=scope.run.run_id,
        step_key=rec.key,
        idempotency_key=rec.idempotency_key,
        attempt=rec.attempts + 1,
        tool_name=tool_name,
        step=scope.steps_factory(scope.run, rec.key, scope.options),
        state=scope.run.memory,
    )
    try:
        verdict = await call_maybe_async(check, bound.args[0] if bound.args else bound.input, context)
        entry["required"] = bool(verdict)
    except Exception as exc:  # fail closed: a check that cannot say means a person decides
        entry["required"] = True
        entry["error"] = f"{type(exc).__name__}: {exc}"
    rec.attempt_log.append(entry)
    return bool(entry["required"])


async def _wait(scope: CommandScope, req: ApprovalRequest) -> ApprovalRequest | None:
    """The request once decided or expired; ``None`` when the command must stop first."""
    hub, stop = scope.approvals, scope.stop
    held_until = now() + scope.options.approval_hold
    stop.pause()
    stopped = asyncio.ensure_future(stop.event.wait())
    try:
        while True:
            limit = min(held_until, req.expires_at) - now()
            waiting = asyncio.ensure_future(hub.wait(req, limit))
            await asyncio.wait({waiting, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not waiting.done():  # the command is being stopped for another reason
                waiting.cancel()
                return None
            decided = waiting.result()
            if decided is not None:
                return decided
            if now() >= req.expires_at:
                expired = req.decided("expired", by=None, channel="timeout", at=req.expires_at)
                if await hub.store.decide(expired, condition="overdue"):
                    return expired
                current = await hub.store.get(req.id)  # decided just in time, elsewhere
                if current is not None and current.state != "pending":
                    return current
            elif now() >= held_until:
                return None
    finally:
        stopped.cancel()
        stop.resume()


def _suspended(scope: CommandScope, req: ApprovalRequest) -> ToolError:
    scope.stop.stop("suspended")
    return ToolError(
        f"the call waits for a person's decision on request {req.id}; the command was stopped "
        "and the run resumes once it is decided",
        type=SUSPENDED,
    )


def _verdict(tool: Tool, req: ApprovalRequest) -> Gate | None:
    by = f" by {req.decided_by}" if req.decided_by else ""
    why = f": {req.reason}" if req.reason else ""
    if req.state == "expired":
        return Gate(
            error=ToolError(
                f"nobody decided request {req.id} in time; it expired, and the call did not run",
                type="ApprovalExpired",
            )
        )
    if tool.human is not None and tool.human.kind == "approval" and req.state in ("approved", "rejected"):
        decision = {"approved": req.state == "approved", "by": req.decided_by or "", "reason": req.reason}
        return Gate(result=dumps(decision))
    if req.state == "approved":
        return Gate(result=dumps(req.answer)) if tool.human is not None else None
    verb = "rejected" if req.state == "rejected" else "cancelled"
    return Gate(error=ToolError(f"request {req.id} was {verb}{by}{why}", type="ApprovalRejected"))


def _summary(tool: Tool, tool_name: str, arguments: Any) -> str:
    """One line for the person deciding: the question, the action, or the call."""
    if tool.human is not None and isinstance(arguments, dict):
        text = str(arguments.get("question") or arguments.get("action") or "")
    else:
        shown = (
            arguments
            if not isinstance(arguments, dict)
            else ", ".join(f"{key}={dumps(value)}" for key, value in arguments.items())
        )
        text = f"{tool_name}({shown if isinstance(shown, str) else dumps(shown)})"
    return text if len(text) <= 200 else text[:199] + "…"
