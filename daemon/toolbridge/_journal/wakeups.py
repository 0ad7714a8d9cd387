"""Wake-ups for calls between daemons: "an invocation of F was written", "invocation I is settled".

Without them, a serving daemon finds new invocations and a caller finds its result only when
it next looks (they poll, ``_durable/serving.py`` and ``_durable/remote.py``). A wake-up lets
them look at once:

- On PostgreSQL, the write that requests or settles an invocation also sends ``NOTIFY`` on
  the ``toolbridge_functions`` channel, in the same transaction (heard once it commits, never
  for a write rolled back); every daemon ``LISTEN``s on the connection it listens for events
  on, across hosts.
- SQLite has no notifications between processes: journals on one file in one process (two
  bridges in one host program, as tests and samples have them) wake each other directly, and
  other processes find the change when they next poll.

A wake-up only shortens a wait: whoever hears one reads the journal, which stays the truth.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Literal

from toolbridge._journal.statements import Statement

__all__ = ["CHANNEL", "NOTIFY", "Kind", "Listener", "Wakeups"]

log = logging.getLogger("toolbridge")

CHANNEL = "toolbridge_functions"
NOTIFY = Statement(f"SELECT pg_notify('{CHANNEL}', ?)")
"""Sent in the transaction that writes the change (PostgreSQL only)."""

Kind = Literal["invoked", "settled"]
Listener = Callable[[Kind, str], None]
"""Told ``("invoked", function_id)`` or ``("settled", invocation_id)``."""

_PLACES: dict[str, set[Wakeups]] = {}
"""The open SQLite journals of this process, by the file they share."""


class Wakeups:
    """One journal's listeners, and the journals of this process it wakes directly."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._place: str | None = None

    def watch(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` with each wake-up, until the returned function is called."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def join(self, place: str) -> None:
        """Be woken by the journals of this process on ``place`` (a file), and wake them."""
        self._loop = asyncio.get_running_loop()
        self._place = place
        _PLACES.setdefault(place, set()).add(self)

    def leave(self) -> None:
        if self._place is not None:
            peers = _PLACES.get(self._place, set())
            peers.discard(self)
            if not peers:
                _PLACES.pop(self._place, None)
            self._place = None

    def spread(self, kind: Kind, key: str) -> None:
        """Wake every journal of this process on the same file (this one too), each in its loop."""
        for peer in list(_PLACES.get(self._place or "", ())):
            peer._from_any_thread(kind, key)

    def heard_notice(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        """asyncpg's ``LISTEN`` callback: a wake-up another daemon (or this one) sent."""
        try:
            kind, key = json.loads(str(payload))
        except (ValueError, TypeError):
            return
        if kind in ("invoked", "settled") and isinstance(key, str):
            self.heard(kind, key)

    def heard(self, kind: Kind, key: str) -> None:
        for listener in list(self._listeners):
            try:
                listener(kind, key)
            except Exception:  # one broken listener must not starve the others
                log.exception("wake-up listener failed")

    def _from_any_thread(self, kind: Kind, key: str) -> None:
        loop = self._loop
        if loop is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self.heard(kind, key)
        else:
            with contextlib.suppress(RuntimeError):  # that loop closed: nobody to wake there
                loop.call_soon_threadsafe(self.heard, kind, key)


def notice(kind: Kind, key: str) -> str:
    """The ``NOTIFY`` payload of a wake-up."""
    return json.dumps([kind, key])
