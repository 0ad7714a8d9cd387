"""The records a journal keeps: runs, their steps, and sidecar tokens.

Times are float seconds since the epoch in memory; the journal stores integer milliseconds
and converts at its edge.
"""

from __future__ import annotations

import time
from collections.abc import Callable
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
    on_done: Callable[[StepRecord], None] | None = field(default=None, repr=False, compare=False)
    """Told when the step reaches an outcome, before that is written (the run's state adds
    its changes to ``attempt_log`` there). Not stored."""

    @property
    def done(self) -> bool:
        """Whether the step reached an outcome that replay returns without running it."""
        return self.status != "running"

    def complete(self, output_json: str) -> None:
        if self.on_done is not None:
            self.on_done(self)
        self.status = "completed"
        self.output_json = output_json
        self.error = None
        self.finished_at = now()

    def fail(self, error: dict[str, Any]) -> None:
        if self.on_done is not None:
            self.on_done(self)
        self.status = "failed"
        self.error = error
        self.finished_at = now()

    def reopen(self) -> None:
        """Run the step again: ``running``, its last error and finish time cleared."""
        self.status, self.error, self.finished_at = "running", None, None

    def take_back(self) -> None:
        """Undo an outcome the journal could not record: ``running`` again, with no output.

        What is not on disk must not be in memory either: a replay while the run is live
        then does what it does after a crash.
        """
        self.status, self.output_json, self.error, self.finished_at = "running", None, None, None


@dataclass(frozen=True)
class RunSummary:
    """A run as ``toolbridge runs`` lists it."""

    run_id: str
    # waiting: open on a request for a person's decision; cancelled: ended by a person (see
    # _journal.runquery); interrupted: shown for a run left
    # running by a daemon whose lease ran out (it died), never stored (see _ui.view.as_shown)
    status: RunStatus | Literal["waiting", "interrupted", "cancelled"]
    started_at: float
    updated_at: float
    finished_at: float | None
    entries: int
    steps: int
    error: str | None
    owner: str | None = None
    """The daemon that holds (or last held) the run's lease."""
    lease_expires_at: float | None = None
    """When the holder's lease runs out unless renewed; ``None`` once it left the run."""
    fence: int = 0
    """Counts the holders the run has had: each takeover increases it."""


@dataclass(frozen=True)
class SidecarToken:
    """A token that lets a sandbox started outside the daemon call some of its tools.

    Attributes:
        id: Names the token (for revoking and listing); not a secret.
        run_id: The durable run its calls are recorded in.
        tools: The registered tools it may call.
        max_calls: How many calls it may make in all.
        calls: How many of its budget it has used (as last recorded).
        created_at: When it was minted (seconds since the epoch).
        expires_at: When it stops working (seconds since the epoch).
        revoked_at: When it was revoked, if it was.
        token: The bearer token to hand to the sandbox as ``TOOLBRIDGE_TOKEN``; only known
            right after minting (only a hash is stored).
    """

    id: str
    run_id: str
    tools: tuple[str, ...]
    max_calls: int
    calls: int
    created_at: float
    expires_at: float
    revoked_at: float | None = None
    token: str | None = None

    def active(self, at: float | None = None) -> bool:
        """Whether the token is neither revoked nor expired (now, or at ``at``)."""
        return self.revoked_at is None and (now() if at is None else at) < self.expires_at


def check_run_id(run_id: object) -> str:
    """Return ``run_id`` if it is a valid run id.

    Raises:
        ValueError: naming the rule, for anything else.
    """
    if not isinstance(run_id, str) or not run_id or len(run_id) > 200 or not run_id.isprintable():
        raise ValueError(f"invalid run id {run_id!r}: use a printable string of 1 to 200 characters")
    return run_id
