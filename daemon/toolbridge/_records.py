"""The records a journal keeps: runs and their steps."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

StepStatus = Literal["running", "completed", "failed"]
RunStatus = Literal["running", "completed", "failed"]


def now() -> float:
    """Wall-clock seconds since the epoch, as the journal stores times."""
    return time.time()


@dataclass
class StepRecord:
    """One durable step, as it stands in memory. The journal stores snapshots of it.

    ``input_json`` and ``output_json`` hold JSON text exactly as it is sent, so a replayed
    result reaches the sandbox byte for byte as it did the first time.
    """

    run_id: str
    key: str
    parent_key: str | None
    seq: int
    kind: str
    name: str
    idempotency_key: str
    started_at: float = field(default_factory=now)
    status: StepStatus = "running"
    input_json: str | None = None
    output_json: str | None = None
    error: dict[str, Any] | None = None
    attempts: int = 0
    attempt_log: list[dict[str, Any]] = field(default_factory=list)
    finished_at: float | None = None
    stale: bool = False

    @property
    def done(self) -> bool:
        """Whether the step reached an outcome that replay returns without running it."""
        return self.status != "running"

    def complete(self, output_json: str) -> None:
        self.status = "completed"
        self.output_json = output_json
        self.error = None
        self.finished_at = now()

    def fail(self, error: dict[str, Any]) -> None:
        self.status = "failed"
        self.error = error
        self.finished_at = now()


@dataclass(frozen=True)
class RunSummary:
    """A run as ``toolbridge runs`` lists it."""

    run_id: str
    status: RunStatus | Literal["waiting"]  # waiting: open on a request for a person's decision
    started_at: float
    updated_at: float
    finished_at: float | None
    entries: int
    steps: int
    error: str | None
