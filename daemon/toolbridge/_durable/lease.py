"""A run's hold on its lease, as the work on it sees it: still ours, renewed in time, or lost.

Entering a run takes its lease in the journal (``_durable.runs`` renews it); this is what the
run's work checks before it starts: a daemon that was paused past its lease makes sure the run
is still its own, and once another daemon has taken the run over nothing more starts here.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable

from toolbridge._errors import RunLeaseLostError

__all__ = ["RunLease"]


class RunLease:
    """Whether this bridge still holds a run, and who is told when it does not."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        # Set once another daemon took the run over (see Runs): nothing more runs here, and
        # the run's commands are stopped.
        self.lost: RunLeaseLostError | None = None
        self._on_lost: list[Callable[[RunLeaseLostError], None]] = []
        # When this bridge's hold on the run runs out unless renewed (monotonic seconds), and
        # how to renew it: new work that would start past it first makes sure the run is
        # still ours, so a daemon that was paused does not start steps it no longer owns.
        self.lease_deadline = math.inf
        self.renew: Callable[[], Awaitable[bool]] | None = None

    def on_lost(self, callback: Callable[[RunLeaseLostError], None]) -> Callable[[], None]:
        """Call ``callback`` if the run is taken over; returns a function that cancels that."""
        self._on_lost.append(callback)
        return lambda: self._on_lost.remove(callback) if callback in self._on_lost else None

    def lose(self, error: RunLeaseLostError) -> None:
        """Note that another daemon took the run over, and tell whoever asked."""
        if self.lost is None:
            self.lost = error
            for callback in list(self._on_lost):
                callback(error)

    def _renewal_due(self) -> bool:
        return self.renew is not None and time.monotonic() >= self.lease_deadline

    async def check_lease(self) -> None:
        """Raise :class:`RunLeaseLostError` unless the run is still this bridge's to run."""
        if self.lost is None and self._renewal_due():
            assert self.renew is not None  # (what _renewal_due checked)
            await self.renew()
        if self.lost is not None:
            raise RunLeaseLostError(self.run_id, self.lost.owner)
