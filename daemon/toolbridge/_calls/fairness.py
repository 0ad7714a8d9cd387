"""Fair shares of the daemon between commands: a flooding command cannot crowd out a quiet one.

Every call of every command is served by one event loop, one pool of tool threads and one
journal writer, and each of them serves its work first come, first served. A command with
32 calls running puts 32 calls ahead of a quiet command's one in each of those queues
(measured: the quiet command's call then spends its time in the handler, mostly waiting on
the group commit, the tool threads and the loop; not in gRPC's read path). So a command may
have only its share of calls executing while other commands have calls too:

- alone, a command is not limited here (only by ``ToolOptions.max_in_flight``): a lone
  command fanning out slow I/O-bound calls keeps all of its parallelism;
- beside others, each command may execute ``max(MIN_SHARE, SHARED_CALLS // commands)``
  calls at once, where ``commands`` counts those with calls executing or waiting, or with
  one that ended less than ``LINGER`` seconds ago; the rest of its calls wait, in order, in
  its own queue. A command below its share, such as a quiet one making one call at a
  time, never waits: its call goes ahead of a flooder's backlog. (Without the linger, the
  quiet command would leave between two calls, and the flooder's whole backlog would rush
  in just as its next call arrives: measured, that made its median worse, not better);
- a call waits at most ``MAX_WAIT`` seconds: the share orders calls, it never stops a
  command whose own calls are slow (a tool that blocks, a call waiting for a person).

A share counts calls, not their cost, and serves the daemon's own queues only: CPU the
sandboxes themselves burn is the operating system's to share (``ToolOptions.max_call_rate``
bounds how fast one command may call at all). There is one scheduler per event loop, since
the loop is what it shares (two bridges on one loop share one loop).
"""

from __future__ import annotations

import asyncio
import collections
import weakref
from dataclasses import dataclass, field

__all__ = ["MAX_WAIT", "MIN_SHARE", "SHARED_CALLS", "FairShare", "fair_share"]

SHARED_CALLS = 16
"""Calls executing at once that the commands with calls share out between them."""

MIN_SHARE = 4
"""Calls each command may execute at once however many commands there are."""

MAX_WAIT = 1.0
"""Seconds a call may wait for its command's share before it is let in anyway."""

LINGER = 0.25
"""Seconds a command still counts among those sharing after its last call ended."""


@dataclass(eq=False)
class _Command:
    executing: int = 0
    waiting: collections.deque[asyncio.Future[None]] = field(default_factory=collections.deque)
    idle_since: float | None = None  # when its last call ended, while it lingers


class FairShare:
    """Admits calls of many commands (any hashable owner) by shares, as the module says."""

    def __init__(
        self,
        *,
        shared: int = SHARED_CALLS,
        floor: int = MIN_SHARE,
        max_wait: float | None = None,
        linger: float | None = None,
    ) -> None:
        self._shared = shared
        self._floor = floor
        self._max_wait = MAX_WAIT if max_wait is None else max_wait
        self._linger = LINGER if linger is None else linger
        self._commands: dict[object, _Command] = {}  # those with calls, or lingering

    def share(self) -> int:
        """Calls each command may execute now (everything, for a command alone)."""
        commands = len(self._commands)
        return max(self._floor, self._shared // commands) if commands > 1 else 1 << 30

    def executing(self, owner: object) -> int:
        command = self._commands.get(owner)
        return 0 if command is None else command.executing

    async def enter(self, owner: object) -> None:
        """Return once ``owner`` may execute one more call; :meth:`leave` gives it back."""
        command = self._commands.get(owner)
        if command is None:
            command = self._commands[owner] = _Command()
        command.idle_since = None
        if not command.waiting and command.executing < self.share():
            command.executing += 1
            return
        loop = asyncio.get_running_loop()
        turn: asyncio.Future[None] = loop.create_future()
        command.waiting.append(turn)
        # Let it in anyway after max_wait: its own slow calls must not hold it back for ever.
        late = loop.call_later(self._max_wait, self._let_in_late, owner, turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # admitted as it was cancelled: give it back
                self.leave(owner)
            else:
                self._forget(owner, turn)
            raise
        finally:
            late.cancel()

    def leave(self, owner: object) -> None:
        """Give back a call admitted by :meth:`enter`, and admit who may go now."""
        command = self._commands[owner]
        command.executing -= 1
        if command.executing or command.waiting:
            self._admit(command)
        else:
            self._idle(owner, command)

    def _idle(self, owner: object, command: _Command) -> None:
        loop = asyncio.get_running_loop()
        command.idle_since = since = loop.time()
        loop.call_later(self._linger, self._expire, owner, command, since)

    def _expire(self, owner: object, command: _Command, since: float) -> None:
        if self._commands.get(owner) is not command or command.idle_since != since:
            return  # it called again meanwhile
        del self._commands[owner]  # one command fewer: the others' shares may have grown
        for other in list(self._commands.values()):
            self._admit(other)

    def _admit(self, command: _Command) -> None:
        share = self.share()
        while command.waiting and command.executing < share:
            turn = command.waiting.popleft()
            if not turn.done():
                command.executing += 1
                turn.set_result(None)

    def _let_in_late(self, owner: object, turn: asyncio.Future[None]) -> None:
        command = self._commands.get(owner)
        if command is None or turn.done():
            return
        command.waiting.remove(turn)
        command.executing += 1
        turn.set_result(None)

    def _forget(self, owner: object, turn: asyncio.Future[None]) -> None:
        command = self._commands.get(owner)
        if command is None:
            return
        if turn in command.waiting:
            command.waiting.remove(turn)
        if not command.executing and not command.waiting:
            self._idle(owner, command)


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, FairShare] = weakref.WeakKeyDictionary()


def fair_share() -> FairShare:
    """The running loop's scheduler (made on first use)."""
    loop = asyncio.get_running_loop()
    scheduler = _by_loop.get(loop)
    if scheduler is None:
        scheduler = _by_loop[loop] = FairShare()
    return scheduler
