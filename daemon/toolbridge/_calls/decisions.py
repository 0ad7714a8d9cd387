"""Deciding requests: ``bridge.approvals`` in host code, and ``toolbridge approvals`` on the CLI.

There is no way to decide from a sandbox: no RPC does it, and a sandbox's token grants only
its own tools. Each decision is a compare-and-swap in the journal; the loser of a race (or a
second decision) gets an :class:`ApprovalError` saying how, by whom and when it was decided.
"""

from __future__ import annotations

import datetime
from typing import Any

from toolbridge._calls.hub import ApprovalHub
from toolbridge._errors import ApprovalError
from toolbridge._journal.approvals import ApprovalRequest, RequestState
from toolbridge._records import now
from toolbridge._schema.schema import SchemaValidationError, schema_from

__all__ = ["Approvals"]


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "an unknown time"
    return datetime.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M:%S")


def _already(req: ApprovalRequest) -> ApprovalError:
    if req.state == "expired":
        return ApprovalError(f"request {req.id} expired at {_when(req.decided_at)}", request=req)
    by = f" by {req.decided_by}" if req.decided_by else ""
    via = f" via {req.channel}" if req.channel else ""
    why = f" ({req.reason})" if req.reason else ""
    how = "answered" if req.kind == "input" and req.state == "approved" else req.state
    return ApprovalError(
        f"request {req.id} was already decided: {how}{by}{via} at {_when(req.decided_at)}{why}",
        request=req,
    )


class Approvals:
    """Requests for a person's decision, and deciding them: ``bridge.approvals``.

    A decision wakes the call that waits on it: at once in the bridge that made the request,
    within a fraction of a second in another process serving the same journal.
    """

    def __init__(self, hub: ApprovalHub, *, channel: str) -> None:
        self._hub = hub
        self._channel = channel

    def via(self, channel: str) -> Approvals:
        """These approvals, recording each decision as made through ``channel``.

        For a face that decides on a person's behalf (the MCP server records ``"mcp"``), so the
        journal says how each decision really came (``"api"``, ``"cli"``, ``"web"``, ``"mcp"``).
        """
        return Approvals(self._hub, channel=channel)

    async def list(
        self, run_id: str | None = None, *, state: RequestState | None = "pending"
    ) -> list[ApprovalRequest]:
        """Requests, oldest first: those pending, of every run or of ``run_id``.

        Args:
            run_id: Only this run's requests.
            state: Only requests in this state; ``None`` for all of them.
        """
        return await self._hub.store.list(run_id=run_id, states=None if state is None else [state])

    async def get(self, request_id: str) -> ApprovalRequest:
        """One request, in whatever state.

        Raises:
            ApprovalError: when there is no such request.
        """
        req = await self._hub.store.get(request_id)
        if req is None:
            raise ApprovalError(f"no request {request_id!r} in this journal")
        return req

    async def approve(self, request_id: str, *, by: str, reason: str | None = None) -> ApprovalRequest:
        """Approve a call (or an action asked for with ``request_approval``): it runs now.

        Raises:
            ApprovalError: unknown, a question (answer it instead), or already decided.
        """
        req = await self.get(request_id)
        if req.kind != "approval":
            raise ApprovalError(f"request {request_id} asks a question: answer it instead", request=req)
        return await self._decide(req, "approved", by=by, reason=reason)

    async def reject(self, request_id: str, *, by: str, reason: str) -> ApprovalRequest:
        """Reject a request: the call fails with ``ApprovalRejected`` carrying ``reason``
        (``request_approval`` returns ``approved: false`` instead).

        Raises:
            ApprovalError: unknown or already decided.
        """
        return await self._decide(await self.get(request_id), "rejected", by=by, reason=reason)

    async def answer(self, request_id: str, answer: Any, *, by: str) -> ApprovalRequest:
        """Answer a question asked with ``ask_user``; the answer is validated first.

        Raises:
            ApprovalError: unknown, not a question, an answer that does not validate (the
                request stays pending), or already decided.
        """
        req = await self.get(request_id)
        if req.kind != "input":
            raise ApprovalError(f"request {request_id} asks for approval: approve or reject it", request=req)
        if req.answer_schema is not None:
            schema = schema_from(req.answer_schema)
            assert schema is not None
            try:
                answer = schema.to_jsonable(schema.validate_python(answer, strict=False))
            except SchemaValidationError as exc:
                raise ApprovalError(f"invalid answer to request {request_id}: {exc}", request=req) from None
        return await self._decide(req, "approved", by=by, answer=answer)

    async def _decide(
        self,
        req: ApprovalRequest,
        state: RequestState,
        *,
        by: str,
        reason: str | None = None,
        answer: Any = None,
    ) -> ApprovalRequest:
        if not isinstance(by, str) or not by.strip():
            raise ApprovalError("say who decides: by= must be a non-empty name")
        decided = req.decided(state, by=by, channel=self._channel, reason=reason, answer=answer)
        store = self._hub.store
        if await store.decide(decided, condition="live"):
            self._hub.notify(decided)
            return decided
        current = await store.get(req.id) or req
        if current.state == "pending" and now() >= current.expires_at:
            expired = current.decided("expired", by=None, channel="timeout", at=current.expires_at)
            if await store.decide(expired, condition="overdue"):
                self._hub.notify(expired)
            current = await store.get(req.id) or expired
        raise _already(current)
