"""Deadlines that survive a wall clock that jumps, and a replay after a crash.

Within a process every wait is on the monotonic clock (asyncio's). A durable wait must also
resume after a crash with the time that was left, so its deadline is recorded twice: on the
machine's boot clock (``CLOCK_BOOTTIME``, monotonic across processes and counting suspend),
tagged with the boot's id, and on the wall clock. A replay on the same boot uses the boot
clock, which no clock change moves: it neither hangs nor fires early. After a reboot only the
wall clock is left, and the time left is capped at the wait's whole length, so a clock set
back cannot make the wait longer than it was asked to be.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolbridge._records import now

__all__ = ["deadline_in", "remaining"]


@functools.cache
def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def _boot_clock() -> float | None:
    clock = getattr(time, "CLOCK_BOOTTIME", None)
    return None if clock is None or _boot_id() is None else time.clock_gettime(clock)


def deadline_in(seconds: float) -> dict[str, Any]:
    """A deadline ``seconds`` from now, as a step records it."""
    deadline: dict[str, Any] = {"seconds": seconds, "at": now() + seconds}
    boot = _boot_clock()
    if boot is not None:
        deadline |= {"boot_id": _boot_id(), "boot_at": boot + seconds}
    return deadline


def remaining(deadline: Mapping[str, Any]) -> float:
    """Seconds left until a recorded deadline (never negative, never more than its length)."""
    seconds = float(deadline["seconds"])
    boot = _boot_clock()
    if boot is not None and deadline.get("boot_id") == _boot_id() and "boot_at" in deadline:
        left = float(deadline["boot_at"]) - boot
    else:
        left = float(deadline["at"]) - now()
    return min(max(left, 0.0), seconds)
