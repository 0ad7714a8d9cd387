"""The trace of a run: its steps as a tree, as ``toolbridge trace`` shows it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from toolbridge._journal.approvals import ApprovalRequest
from toolbridge._records import RunSummary, StepRecord


@dataclass
class TraceNode:
    """A step and the steps nested under it (tool calls under a command, ...)."""

    step: StepRecord
    children: list[TraceNode] = field(default_factory=list)
    approvals: list[ApprovalRequest] = field(default_factory=list)  # what a person was asked

    @property
    def duration(self) -> float | None:
        if self.step.finished_at is None:
            return None
        return self.step.finished_at - self.step.started_at

    def to_dict(self) -> dict[str, Any]:
        step = self.step
        return {
            "step_key": step.key,
            "kind": step.kind,
            "name": step.name,
            "status": step.status,
            "stale": step.stale,
            "started_at": step.started_at,
            "finished_at": step.finished_at,
            "duration": self.duration,
            "idempotency_key": step.idempotency_key,
            "input": _parse(step.input_json),
            "output": _parse(step.output_json),
            "error": step.error,
            "attempts": step.attempt_log,
            "approvals": [request_to_dict(req) for req in self.approvals],
            "children": [child.to_dict() for child in self.children],
        }


def _parse(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def request_to_dict(req: ApprovalRequest) -> dict[str, Any]:
    """A request as the trace shows it under its call: state, who, via what, when, why."""
    return {
        "id": req.id,
        "kind": req.kind,
        "state": req.state,
        "by": req.decided_by,
        "via": req.channel,
        "asked_at": req.created_at,
        "decided_at": req.decided_at,
        "reason": req.reason,
        "summary": req.summary,
    }


def build_tree(steps: list[StepRecord], requests: Sequence[ApprovalRequest] = ()) -> list[TraceNode]:
    """Top-level nodes of a run, in the order their steps started; children likewise.
    Each request goes under the call that made it."""
    nodes = {step.key: TraceNode(step) for step in sorted(steps, key=lambda s: s.seq)}
    for req in requests:
        if req.step_key in nodes:
            nodes[req.step_key].approvals.append(req)
    roots: list[TraceNode] = []
    for node in nodes.values():
        parent = nodes.get(node.step.parent_key) if node.step.parent_key is not None else None
        (parent.children if parent is not None else roots).append(node)
    return roots


def run_to_dict(run: RunSummary) -> dict[str, Any]:
    duration = None if run.finished_at is None else run.finished_at - run.started_at
    return {
        "run_id": run.run_id,
        "status": run.status,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "duration": duration,
        "entries": run.entries,
        "steps": run.steps,
        "error": run.error,
        "owner": run.owner,
        "lease_expires_at": run.lease_expires_at,
        "fence": run.fence,
    }
