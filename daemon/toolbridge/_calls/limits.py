"""Calls in flight per command: a flooding sandbox is refused, not queued.

Without a limit, one sandbox could put thousands of calls in flight at once and take the
daemon's time from every other command. Each command may have ``ToolOptions.max_in_flight``
calls running; the next one is refused at once with ``RESOURCE_EXHAUSTED``, saying when to
try again, and counts against nothing (not the call budget, not the journal).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from toolbridge._calls.scope import CommandScope
from toolbridge._errors import ProtocolError

__all__ = ["RETRY_AFTER", "stream_slot", "take_in_flight_slot"]

log = logging.getLogger("toolbridge")

RETRY_AFTER = 0.1
"""Seconds a refused sandbox is told to wait before it calls again."""


def take_in_flight_slot(scope: CommandScope) -> None:
    """Take one of the command's in-flight slots; the caller gives it back (``in_flight -= 1``).

    Not a context manager: it runs once per call on the hot path.

    Raises:
        ProtocolError: ``RESOURCE_EXHAUSTED`` when every slot is taken.
    """
    limit = scope.options.max_in_flight
    if scope.in_flight >= limit:
        log.info("refused a call of command %r: %d calls in flight", scope.command_key, scope.in_flight)
        raise ProtocolError(
            "RESOURCE_EXHAUSTED",
            f"this command already has {limit} tool calls in flight, the most it may "
            f"(ToolOptions.max_in_flight); retry in {RETRY_AFTER * 1000:.0f} ms, once one has finished",
            retry_after=RETRY_AFTER,
        )
    scope.in_flight += 1


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
            f"this command already has {limit} call streams open, the most it may "
            "(ToolOptions.max_streams); close one, or send more calls on one stream",
        )
    scope.streams += 1
    try:
        yield
    finally:
        scope.streams -= 1
