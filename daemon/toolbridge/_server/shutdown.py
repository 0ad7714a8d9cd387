"""Shutting a bridge down gracefully: refuse new calls, let those in flight finish, then stop.

A daemon told to stop (SIGTERM from a supervisor, or leaving ``async with Bridge``) must not
abandon calls that are running: their tools may be halfway through a payment. So shutting
down (1) refuses every new call with ``UNAVAILABLE``, (2) gives the calls in flight up to the
grace period to finish, their outcomes journaled as usual, (3) cancels what is left (such a
step stays ``running``, and a replay runs it again), and (4) stops serving.

Signals are handled only when the host asks (:meth:`Shutdown.install`): a library that took
over SIGTERM behind its host's back would surprise a host with its own handling (a web
server, a worker framework).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from toolbridge._errors import ProtocolError

__all__ = ["Shutdown"]

log = logging.getLogger("toolbridge")

SHUTTING_DOWN = "the daemon is shutting down; call again once it is back (a replay answers recorded calls)"


class Shutdown:
    """One bridge's shutdown: whether it has begun, the grace, and the signals that start it.

    Args:
        grace: Seconds that calls in flight get to finish once shutdown begins.
    """

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.draining = False
        self.signal: int | None = None
        """The signal that started the shutdown, if one did."""
        self._installed: tuple[asyncio.AbstractEventLoop, tuple[int, ...]] | None = None

    @property
    def grace(self) -> float:
        return self._grace

    @grace.setter
    def grace(self, seconds: float) -> None:
        if not isinstance(seconds, int | float) or isinstance(seconds, bool) or not seconds >= 0:
            raise ValueError(f"shutdown_grace must be a number of seconds of at least 0, got {seconds!r}")
        self._grace = float(seconds)

    def refuse_if_draining(self) -> None:
        """Refuse a new call once shutdown has begun.

        Raises:
            ProtocolError: ``UNAVAILABLE``, while shutting down.
        """
        if self.draining:
            raise ProtocolError("UNAVAILABLE", SHUTTING_DOWN)

    async def drain(
        self, in_flight: set[asyncio.Future[Any]], *, stop_serving: Callable[[float], Awaitable[None]]
    ) -> None:
        """Refuse new calls, wait up to the grace for ``in_flight``, cancel what is left.

        ``stop_serving(grace)`` runs meanwhile: the server takes no new RPCs and gives those
        it serves the same grace. A call cancelled here stays ``running``, for a replay.
        """
        self.draining = True
        await asyncio.gather(stop_serving(self.grace), self._finish(in_flight))

    async def _finish(self, in_flight: set[asyncio.Future[Any]]) -> None:
        pending = {task for task in in_flight if not task.done()}
        if pending and self.grace > 0:
            _, pending = await asyncio.wait(pending, timeout=self.grace)
        if pending:
            log.warning(
                "%d call(s) still running after the %g s shutdown grace: cancelled", len(pending), self.grace
            )
        for task in pending:
            task.cancel()
        await asyncio.gather(*in_flight, return_exceptions=True)

    def install(self, signals: Iterable[int]) -> None:
        """On the first of ``signals``, cancel the current task (which holds the bridge open)."""
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("install_signal_handlers() must be called from a task")
        self.remove()
        chosen = tuple(signals)
        for signum in chosen:
            loop.add_signal_handler(signum, self._on_signal, signum, task)
        self._installed = (loop, chosen)

    def remove(self) -> None:
        """Give the signals back their default handling."""
        if self._installed is not None:
            loop, chosen = self._installed
            self._installed = None
            for signum in chosen:
                loop.remove_signal_handler(signum)

    def _on_signal(self, signum: int, task: asyncio.Task[Any]) -> None:
        # A second signal is not caught: it acts as it would without toolbridge (SIGTERM kills).
        self.remove()
        self.signal = signum
        self.draining = True
        log.warning(
            "%s: refusing new calls; calls in flight get %g s to finish",
            signal.Signals(signum).name,
            self.grace,
        )
        task.cancel()

    def exit_if_signalled(self, exc: BaseException | None) -> None:
        """End the program with status 0 when ``exc`` is the cancellation a signal caused.

        Raises:
            SystemExit: status 0, once the bridge is closed after a signal.
        """
        task = asyncio.current_task()
        if self.signal is not None and isinstance(exc, asyncio.CancelledError) and task is not None:
            task.uncancel()
            raise SystemExit(0) from None
