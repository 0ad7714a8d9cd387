"""How fast one command may call: a token bucket that paces the calls beyond its rate.

A command may make ``ToolOptions.call_burst`` calls at once, and then
``ToolOptions.max_call_rate`` a second on average. A call beyond that waits for its turn
rather than being refused: sandboxed code, often written by a model, rarely handles a
refusal well, and a refused call retried at once costs the daemon more than one that waits.
A waiting call holds one of the command's ``max_in_flight`` slots, so the calls that can
wait are bounded, and the next one past them is refused as any call past that limit is.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

__all__ = ["TokenBucket"]


@dataclass(eq=False)
class TokenBucket:
    """``burst`` tokens, refilled at ``rate`` a second; each call takes one, or its wait."""

    rate: float
    burst: int
    tokens: float = field(init=False)
    _stamp: float = field(init=False, default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.tokens = float(self.burst)

    def take(self) -> float:
        """Take a token; return the seconds to wait for it (0 when there was one).

        A call that must wait takes its token in advance (the count goes below zero), so
        calls waiting together get successive turns, in order, one ``1 / rate`` apart.
        """
        now = time.monotonic()
        self.tokens = min(float(self.burst), self.tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        self.tokens -= 1.0
        return 0.0 if self.tokens >= 0.0 else -self.tokens / self.rate

    def give_back(self) -> None:
        """Return a token taken for a call that never ran (cancelled while it waited)."""
        self.tokens = min(float(self.burst), self.tokens + 1.0)
