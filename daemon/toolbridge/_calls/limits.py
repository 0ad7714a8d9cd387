"""What a call of a command passes before it runs: its slot, its pace, its fair share.

Without limits, one sandbox could put thousands of calls in flight at once and take the
daemon's time from every other command. So each call of a command, in this order:

1. takes one of the command's ``ToolOptions.max_in_flight`` slots, or is refused at once
   with ``RESOURCE_EXHAUSTED``, saying when to try again (it counts against nothing: not
   the call budget, not the journal);
2. waits for its turn under the command's rate (:mod:`_calls.pacing`), if it calls faster
   than ``ToolOptions.max_call_rate``;
3. waits for its command's fair share of the daemon (:mod:`_calls.fairness`), if other
   commands have calls too and this one has its share executing.

A call the host makes itself (``Bridge.call_tool``) takes only the first step: the host is
not a sandbox to be kept in check.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from types import TracebackType

from toolbridge._calls.fairness import FairShare, Ticket, fair_share
from toolbridge._calls.pacing import TokenBucket
from toolbridge._calls.scope import CommandScope
from toolbridge._errors import ProtocolError

__all__ = ["RETRY_AFTER", "call_slot", "in_flight_slot", "stream_slot"]

log = logging.getLogger("toolbridge")

RETRY_AFTER = 0.1
"""Seconds a refused sandbox is told to wait before it calls again."""


class call_slot:  # noqa: N801 (used as a context manager, as contextlib's are)
    """``async with call_slot(scope):`` around the answer to one call (see the module docstring).

    A class rather than a generator: it is on every call's path, and costs less so.

    Raises:
        ProtocolError: ``RESOURCE_EXHAUSTED`` when every in-flight slot is taken.
    """

    __slots__ = ("_scope", "_shared", "_ticket")

    def __init__(self, scope: CommandScope) -> None:
        self._scope = scope
        self._shared: FairShare | None = None
        self._ticket: Ticket | None = None

    async def __aenter__(self) -> None:
        scope = self._scope
        _take_in_flight(scope)
        if not scope.command_key:  # the host's own call
            return
        try:
            bucket = scope.bucket
            if bucket is None:
                bucket = scope.bucket = TokenBucket(scope.options.max_call_rate, scope.options.call_burst)
            wait = bucket.take()
            if wait:
                try:
                    await asyncio.sleep(wait)
                except asyncio.CancelledError:
                    bucket.give_back()
                    raise
            shared = scope.share
            if shared is None:
                shared = scope.share = fair_share()
            self._ticket = shared.try_enter(scope) or await shared.wait_turn(scope)
            self._shared = shared
        except BaseException:
            scope.in_flight -= 1
            raise

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._shared is not None and self._ticket is not None:
            self._shared.leave(self._scope, self._ticket)
        self._scope.in_flight -= 1


def _take_in_flight(scope: CommandScope) -> None:
    limit = scope.options.max_in_flight
    if scope.in_flight >= limit:
        log.info("refused a call of command %r: %d calls in flight", scope.command_key, scope.in_flight)
        raise ProtocolError(
            "RESOURCE_EXHAUSTED",
            f"{scope.caller} already has {limit} tool calls in flight, the most it may "
            f"(ToolOptions.max_in_flight); retry in {RETRY_AFTER * 1000:.0f} ms, once one has finished",
            retry_after=RETRY_AFTER,
        )
    scope.in_flight += 1


@contextlib.contextmanager
def in_flight_slot(scope: CommandScope) -> Iterator[None]:
    """Hold one of the command's in-flight slots while a call is answered (no pace, no share).

    Raises:
        ProtocolError: ``RESOURCE_EXHAUSTED`` when every slot is taken.
    """
    _take_in_flight(scope)
    try:
        yield
    finally:
        scope.in_flight -= 1


@contextlib.contextmanager
def stream_slot(scope: CommandScope | None) -> Iterator[None]:
    """Hold one of the command's open streams for the life of a ``CallToolStream``.

    ``None`` (a token that grants nothing, or not now) holds nothing: each call on the
    stream is refused for itself.

    An open stream holds a connection (a descriptor of the daemon's) however idle it is, so a
    sandbox that opens streams without end would take the descriptors of every other command.

    Raises:
        ProtocolError: ``RESOURCE_EXHAUSTED`` when the command has ``max_streams`` open.
    """
    if scope is None:
        yield
        return
    limit = scope.options.max_streams
    if scope.streams >= limit:
        log.info("refused a stream of command %r: %d streams open", scope.command_key, scope.streams)
        raise ProtocolError(
            "RESOURCE_EXHAUSTED",
            f"{scope.caller} already has {limit} call streams open, the most it may "
            "(ToolOptions.max_streams); close one, or send more calls on one stream",
        )
    scope.streams += 1
    try:
        yield
    finally:
        scope.streams -= 1
