"""What an egress request must pass, and what of it is kept: the checks, the approval, its step.

Every request is checked, in order: the budget (``429``); a placeholder bound to another host
anywhere in it (``403``); the host and method allowed (``403``); a person's approval when the
rule asks for one. Each request is a step of the command (kind ``egress``): method, URL,
status, sizes, timing, and the names of the secrets used, never their values; and a client
span under the command's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from toolbridge._calls import approvals
from toolbridge._calls.scope import CommandScope
from toolbridge._door.http import Target
from toolbridge._door.placeholders import Placeholders
from toolbridge._door.policy import Egress, EgressRule
from toolbridge._json import canonical, digest, dumps
from toolbridge._records import StepRecord
from toolbridge._telemetry import tracing
from toolbridge._tools.tool import BoundCall, Tool

__all__ = ["Gate", "Refusal", "span"]

_APPROVAL = Tool(kind="step", handler=lambda *_: None, requires_confirmation=True, name="egress")


class Refusal(Exception):  # noqa: N818 (an answer, not a fault)
    """A request the door answers itself, with ``status`` and the message."""

    def __init__(self, status: int, message: str, *, recorded: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.recorded = recorded


def span(scope: CommandScope, method: str, target: Target, path: str) -> trace.Span:
    """A client span for one request, under the command's span (HTTP semantic conventions)."""
    return trace.get_tracer(tracing.TRACER_NAME).start_span(
        f"{method} {target.authority}",
        context=scope.trace_context,
        kind=SpanKind.CLIENT,
        attributes={
            "http.request.method": method,
            "server.address": target.host,
            "server.port": target.port,
            "url.scheme": target.scheme,
            "url.path": urlsplit(path).path,
            tracing.RUN_ID: scope.run.run_id,
            tracing.STEP_KIND: "egress",
        },
    )


class Gate:
    """One command's egress requests: checked, approved, journaled.

    Args:
        scope: The command's scope (its run, where requests are journaled and approved).
        egress: What it may do.
        placeholders: Its secrets' placeholders.
    """

    def __init__(self, scope: CommandScope, egress: Egress, placeholders: Placeholders) -> None:
        self.scope = scope
        self.egress = egress
        self.placeholders = placeholders
        self.requests = 0

    def check(
        self, method: str, target: Target, path: str, headers: Sequence[tuple[bytes, bytes]], body: bytes
    ) -> set[str]:
        """The names of the secrets the request may have swapped in; raises to refuse it."""
        self.requests += 1
        if self.requests > self.egress.max_requests:
            raise Refusal(
                429, f"toolbridge egress: this command made more than {self.egress.max_requests} requests"
            )
        found = self.placeholders.found_in(path.encode(), headers, body)
        foreign = self.placeholders.foreign(found, target.host, target.port)
        if foreign:
            raise Refusal(
                403,
                f"toolbridge egress: refused: this request to {target.authority} carries the placeholder "
                f"of secret {', '.join(foreign)}, which is not bound to that host",
            )
        rule = self.egress.rule(target.host, target.port)
        if rule is None:
            raise Refusal(
                403, f"toolbridge egress: {target.authority} is not an allowed host for this command"
            )
        if not rule.allows(method):
            raise Refusal(403, f"toolbridge egress: {method} is not allowed to {target.authority}")
        return found

    def rule(self, target: Target) -> EgressRule:
        """The rule a checked request's host goes by."""
        rule = self.egress.rule(target.host, target.port)
        assert rule is not None
        return rule

    async def step(self, method: str, target: Target, path: str, used: set[str]) -> StepRecord:
        """The request's step: claimed from the journal, or new (and watched: a host killed
        while it runs leaves it interrupted in the trace, not missing)."""
        scope, run = self.scope, self.scope.run
        url = f"{target.scheme}://{target.authority}{path}"
        input_json = canonical({"method": method, "url": url, "secrets": sorted(used)})
        key = await scope.keys.key(f"{scope.command_key}/egress@{digest(input_json, 12)}")
        rec = await run.claim(key, by=scope.keys)
        if rec is None:
            rec = run.new_step(
                key,
                parent_key=scope.command_key or None,
                kind="egress",
                name=f"{method} {target.authority}",
                input_json=input_json,
            )
            # A request still going after a moment is journaled as running: a host killed
            # meanwhile leaves it interrupted in the trace, not missing.
            run.start_records.watch(rec)
        elif not approvals.was_waiting(rec):
            # Made again by a command that ran again: a request is not replayed from the
            # journal (its answer is not recorded), it is made again and recorded anew.
            rec.status, rec.output_json, rec.error, rec.finished_at = "running", None, None, None
        rec.attempts += 1
        return rec

    async def confirm(self, method: str, target: Target, path: str, rec: StepRecord) -> None:
        """Wait for a person's approval when the rule asks for one; raises when not given."""
        if not self.rule(target).confirms(method):
            return
        request = {"method": method, "url": f"{target.scheme}://{target.authority}{path}"}
        bound = BoundCall([request], {}, lambda: request)
        verdict = await approvals.gate(self.scope, _APPROVAL, "egress", rec, bound)
        if verdict is None:
            return
        if verdict.suspended is not None:
            raise Refusal(
                503, "toolbridge egress: the request waits for a person; the command stops", recorded=False
            )
        error = verdict.error
        raise Refusal(403, f"toolbridge egress: {error.message if error else 'not approved'}")

    async def completed(
        self,
        rec: StepRecord,
        *,
        status: int,
        request_bytes: int,
        response_bytes: int,
        started: float,
        used: set[str],
    ) -> None:
        """Journal the request's answer: its status, sizes, time and the secrets' names."""
        rec.complete(
            dumps(
                {
                    "status": status,
                    "request_bytes": request_bytes,
                    "response_bytes": response_bytes,
                    "duration_ms": round((time.monotonic() - started) * 1000, 2),
                    "secrets": sorted(used),
                }
            )
        )
        await self.scope.run.journal.write(rec)

    async def failed(self, rec: StepRecord, error: dict[str, Any]) -> None:
        """Journal the request as failed with ``error``."""
        rec.fail(error)
        await self.scope.run.journal.write(rec)

    async def refused(
        self,
        method: str,
        target: Target,
        path: str,
        status: int,
        message: str,
        *,
        rec: StepRecord | None = None,
    ) -> None:
        """Journal a refusal (as a step of its own when the request had none yet)."""
        if rec is None:
            rec = await self.step(method, target, path, set())
        await self.failed(rec, {"type": "EgressRefused", "message": message, "status": status})
