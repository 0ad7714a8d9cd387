"""Waking a sleeping thread on the CPU the caller runs on, so that a hand-off stays on one core.

Handing work to a thread that sleeps (a tool's worker thread, the journal's writer) and back
costs two wake-ups. The scheduler may wake the sleeper on another CPU, and on a virtual
machine a CPU with nothing to run is halted: waking it is a round trip through the hypervisor.
Measured on a 2-vCPU VM (an asyncio loop handing a no-op to a thread and awaiting its
answer): about 70 µs a hand-off when the thread wakes where it likes, 25 µs when it is woken
on the loop's own CPU, where it runs as soon as the loop waits for it (and the loop, woken by
its answer, runs as soon as it waits again). So a waker pins the sleeper to its own CPU just
before it wakes it, and the woken thread lets itself go anywhere again (:meth:`Sleeper.woke`)
before it does any work: a long tool, or several at once, still spread over every core.

Linux only (``sched_setaffinity`` and libc's ``sched_getcpu``); elsewhere, on a machine with
one CPU, or where the calls are refused (a seccomp policy, a cpuset), a wake-up is left to the
scheduler as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Callable

__all__ = ["Sleeper"]


def _getcpu() -> Callable[[], int] | None:
    """libc's ``sched_getcpu``, where threads can be pinned and there is more than one CPU."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        getcpu = ctypes.CDLL(None).sched_getcpu
        if len(os.sched_getaffinity(0)) < 2:
            return None
    except (OSError, AttributeError):  # no such symbol (neither glibc nor musl), or not allowed
        return None
    getcpu.restype, getcpu.argtypes = ctypes.c_int, []
    return getcpu


_GETCPU = _getcpu()
_enabled = _GETCPU is not None  # turned off for good by the first refused call


class Sleeper:
    """One thread that sleeps between jobs; made by that thread, woken by others.

    The thread marks its sleep (``asleep = True`` just before it blocks, :meth:`woke` once it
    runs again); a waker calls :meth:`wake_here` just before whatever wakes it. A thread that
    is not asleep (it is finishing its last job) is left where it is: moving a running thread
    would make the waker wait for the move.
    """

    __slots__ = ("_cpus", "_pinned", "asleep", "native_id")

    def __init__(self) -> None:
        """In the thread itself: it remembers the CPUs it may run on, to go back to them."""
        self.native_id = threading.get_native_id()
        self._cpus = os.sched_getaffinity(0) if _enabled else set()
        self.asleep = False
        self._pinned = False

    def wake_here(self) -> None:
        """Pin the sleeping thread to the caller's CPU, so that it wakes there (best effort)."""
        global _enabled
        if not (_enabled and self.asleep and self._cpus) or _GETCPU is None:
            return
        try:
            os.sched_setaffinity(self.native_id, {_GETCPU()})
        except OSError:  # refused here: wake-ups go back to the scheduler's choice, for good
            _enabled = False
            return
        self._pinned = True

    def woke(self) -> None:
        """In the woken thread: free it to run on any of its CPUs again."""
        self.asleep = False
        if self._pinned:
            self._pinned = False
            with contextlib.suppress(OSError):  # its own CPUs: never refused; never fail a job for it
                os.sched_setaffinity(0, self._cpus)
