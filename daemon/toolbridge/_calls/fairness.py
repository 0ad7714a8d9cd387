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
- a call counts against its command's share for its first ``COUNTED_FOR`` seconds only: a
  call the daemon works on takes well under that, so one still running is waiting on its
  tool (an HTTP request, a person), not taking the daemon's time. Beside a flood, a quiet
  command waits behind at most about one call of each other command, while a command that
  fans out slow calls still has them all running after ``COUNTED_FOR`` seconds each;
- a call waits at most ``MAX_WAIT`` seconds: the share orders calls, it never stops a
  command whose own calls are slow;
- the shares are that small only while some command is quiet: it has not had more than
  ``QUIET_CALLS`` calls at once (executing or waiting) for ``LINGER`` seconds, as a command
  making one call at a time, or a few in parallel (a model's parallel tool calls), never has.
  When every command with calls is busy, none has a few calls to protect, and each may
  execute up to ``BUSY_SHARE`` calls at once: the more calls the daemon has at once, the
  more each commit and each message carries, so throughput holds as commands are added
  instead of falling (a share of 1 each held 4 busy commands to fewer calls at once than one
  of them alone had).

A share counts calls, not their cost, and serves the daemon's own queues only: CPU the
sandboxes themselves burn is the operating system's to share (``ToolOptions.max_call_rate``
bounds how fast one command may call at all). There is one scheduler per event loop, since
the loop is what it shares (two bridges on one loop share one loop).
"""

from __future__ import annotations

import asyncio
import collections
import math
import weakref
from dataclasses import dataclass, field

__all__ = [
    "BUSY_SHARE",
    "COUNTED_FOR",
    "MAX_WAIT",
    "MIN_SHARE",
    "QUIET_CALLS",
    "SHARED_CALLS",
    "FairShare",
    "Ticket",
    "fair_share",
]

SHARED_CALLS = 2
"""Calls executing at once that the commands with calls share out between them.

Small on purpose: the daemon serves calls one at a time on its loop, so a command's second
call executing at once buys it no speed, only a place ahead of the others (measured beside
a flood of 32 callers: a quiet command's p99 5.5 ms with a share of 1, 7.6 ms with 2,
31 ms with 8, the flood's calls/s the same; again once checkpoints no longer ran inside
commits, two runs each: 2.2 and 2.6 ms with a share of 1, 4.9 and 4.0 ms with 4, 10.5 and
10.3 ms with none, the flood's calls/s 3,337 and 3,204, 2,807 and 3,075, 4,176 and 4,418).
"""

MIN_SHARE = 1
"""Calls each command may execute at once however many commands there are."""

BUSY_SHARE = 8
"""Calls each command may execute at once while no command is quiet (see the module docstring).

Measured with 1, 4 and 16 commands of 8 callers each, all calling at once (``bench/
concurrency.py``, sync echo tool, medians of 3 rounds of 6,400 calls): 3,156, 3,288 and 3,017
calls/s with this; 4 and 16 commands without it (the small shares whatever the commands),
2,440 and 2,216. A quiet command's p99 beside a 32-caller flood was the same either way (6.6
to 7.7 ms, three runs each)."""

QUIET_CALLS = 4
"""The most calls at once (executing or waiting) of a command that is still quiet."""

COUNTED_FOR = 0.005
"""Seconds a call counts against its command's share (see the module docstring)."""

MAX_WAIT = 1.0
"""Seconds a call may wait for its command's share before it is let in anyway."""

LINGER = 0.25
"""Seconds a command still counts among those sharing after its last call ended."""


class Ticket:
    """One admitted call: when it was let in, and whether it still counts against the share."""

    __slots__ = ("counted", "since")

    def __init__(self, since: float) -> None:
        self.since = since
        self.counted = True


@dataclass(eq=False)
class _Command:
    running: int = 0  # calls admitted and not yet left
    executing: int = 0  # those of them that still count against the share
    admitted: collections.deque[Ticket] = field(default_factory=collections.deque)  # in order
    waiting: collections.deque[asyncio.Future[Ticket]] = field(default_factory=collections.deque)
    idle_since: float | None = None  # when its last call ended, while it lingers
    pressed: float = -math.inf  # when it last had more than QUIET_CALLS at once: busy until LINGER after
    recheck: asyncio.TimerHandle | None = None  # while calls wait: when its oldest turns uncounted
    linger: asyncio.TimerHandle | None = None  # while idle: when it stops counting among commands


class FairShare:
    """Admits calls of many commands (any hashable owner) by shares, as the module says."""

    def __init__(
        self,
        *,
        shared: int = SHARED_CALLS,
        floor: int = MIN_SHARE,
        max_wait: float | None = None,
        linger: float | None = None,
        counted_for: float | None = None,
        busy: int | None = BUSY_SHARE,
        quiet: int = QUIET_CALLS,
    ) -> None:
        """``busy``: the share while no command is quiet (``None`` keeps the small shares then
        too); ``quiet``: the most calls at once of a quiet command."""
        self._shared = shared
        self._floor = floor
        self._busy = busy
        self._quiet = quiet
        self._max_wait = MAX_WAIT if max_wait is None else max_wait
        self._linger = LINGER if linger is None else linger
        self._counted_for = COUNTED_FOR if counted_for is None else counted_for
        self._commands: dict[object, _Command] = {}  # those with calls, or lingering

    def share(self) -> int:
        """Calls each command may execute now (everything, for a command alone)."""
        commands = len(self._commands)
        if commands <= 1:
            return 1 << 30
        share = max(self._floor, self._shared // commands)
        if self._busy is None or self._some_quiet():
            return share
        return max(share, self._busy)

    def _some_quiet(self) -> bool:
        """Whether a command among those sharing has not been busy for ``LINGER`` seconds (is quiet)."""
        since = asyncio.get_running_loop().time() - self._linger
        return any(command.pressed < since for command in self._commands.values())

    def _press(self, command: _Command) -> None:
        """Note when ``command`` has more calls at once than a quiet one has (it is busy now).

        A command that turns busy may leave no command quiet: then every command's share has
        grown, and calls waiting for one may go in.
        """
        if command.executing + len(command.waiting) <= self._quiet:
            return
        now = asyncio.get_running_loop().time()
        was_quiet, command.pressed = command.pressed < now - self._linger, now
        if was_quiet and self._busy is not None and not self._some_quiet():
            for other in list(self._commands.values()):
                self._admit(other)

    def counted(self) -> int:
        """Calls of all commands that count against their shares now."""
        for command in self._commands.values():
            self._age(command)
        return sum(command.executing for command in self._commands.values())

    def waiting(self) -> int:
        """Calls of all commands waiting for their shares now."""
        return sum(len(command.waiting) for command in self._commands.values())

    def executing(self, owner: object) -> int:
        """Calls of ``owner`` that count against its share now."""
        command = self._commands.get(owner)
        if command is None:
            return 0
        self._age(command)
        return command.executing

    def try_enter(self, owner: object) -> Ticket | None:
        """:meth:`enter` when ``owner`` may go at once, without a coroutine; else ``None``."""
        command = self._commands.get(owner)
        if command is None:
            command = self._commands[owner] = _Command()
        command.idle_since = None
        if not command.waiting and self._has_room(command):
            ticket = self._let_in(command)
            self._press(command)
            return ticket
        return None

    async def enter(self, owner: object) -> Ticket:
        """Return once ``owner`` may execute one more call; :meth:`leave` gives it back."""
        return self.try_enter(owner) or await self.wait_turn(owner)

    async def wait_turn(self, owner: object) -> Ticket:
        """The rest of :meth:`enter`, once :meth:`try_enter` has said ``owner`` must wait."""
        command = self._commands[owner]
        loop = asyncio.get_running_loop()
        turn: asyncio.Future[Ticket] = loop.create_future()
        command.waiting.append(turn)
        self._press(command)  # may let this very call in: see _press
        self._watch(command)
        # Let it in anyway after max_wait: its own slow calls must not hold it back for ever.
        late = loop.call_later(self._max_wait, self._let_in_late, owner, turn)
        try:
            return await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # admitted as it was cancelled: give it back
                self.leave(owner, turn.result())
            else:
                self._forget(owner, turn)
            raise
        finally:
            late.cancel()

    def leave(self, owner: object, ticket: Ticket) -> None:
        """Give back a call admitted by :meth:`enter`, and admit who may go now."""
        command = self._commands[owner]
        command.running -= 1
        if ticket.counted:
            ticket.counted = False
            command.executing -= 1
        self._age(command)  # keeps the admitted queue as short as the calls of the last moment
        if command.running or command.waiting:
            self._admit(command)
        else:
            self._idle(owner, command)

    def _has_room(self, command: _Command) -> bool:
        share = self.share()
        if command.executing < share:
            return True
        self._age(command)
        return command.executing < share

    def _let_in(self, command: _Command) -> Ticket:
        ticket = Ticket(asyncio.get_running_loop().time())
        command.running += 1
        command.executing += 1
        command.admitted.append(ticket)
        return ticket

    def _age(self, command: _Command) -> None:
        """Stop counting the calls that have run for ``counted_for``, and forget ended ones."""
        admitted = command.admitted
        if not admitted:
            return
        deadline = asyncio.get_running_loop().time() - self._counted_for
        while admitted and (not admitted[0].counted or admitted[0].since <= deadline):
            ticket = admitted.popleft()
            if ticket.counted:
                ticket.counted = False
                command.executing -= 1

    def _watch(self, command: _Command) -> None:
        """While calls wait, look again when the oldest counted call stops counting."""
        if command.recheck is None and command.admitted:
            loop = asyncio.get_running_loop()
            at = command.admitted[0].since + self._counted_for
            command.recheck = loop.call_at(at, self._recheck, command)

    def _recheck(self, command: _Command) -> None:
        command.recheck = None
        self._admit(command)
        if command.waiting:
            self._watch(command)

    def _idle(self, owner: object, command: _Command) -> None:
        loop = asyncio.get_running_loop()
        command.idle_since = loop.time()
        if command.linger is None:  # one timer a command, not one each time it falls idle
            command.linger = loop.call_later(self._linger, self._expire, owner, command)

    def _expire(self, owner: object, command: _Command) -> None:
        command.linger = None
        if self._commands.get(owner) is not command or command.idle_since is None:
            return  # gone, or busy again: falling idle again sets a timer again
        loop = asyncio.get_running_loop()
        left = command.idle_since + self._linger - loop.time()
        if left > 0:  # it called again and fell idle again meanwhile: linger from then
            command.linger = loop.call_later(left, self._expire, owner, command)
            return
        del self._commands[owner]  # one command fewer: the others' shares may have grown
        for other in list(self._commands.values()):
            self._admit(other)

    def _admit(self, command: _Command) -> None:
        while command.waiting and self._has_room(command):
            turn = command.waiting.popleft()
            if not turn.done():
                turn.set_result(self._let_in(command))

    def _let_in_late(self, owner: object, turn: asyncio.Future[Ticket]) -> None:
        command = self._commands.get(owner)
        if command is None or turn.done():
            return
        command.waiting.remove(turn)
        turn.set_result(self._let_in(command))

    def _forget(self, owner: object, turn: asyncio.Future[Ticket]) -> None:
        command = self._commands.get(owner)
        if command is None:
            return
        if turn in command.waiting:
            command.waiting.remove(turn)
        if not command.running and not command.waiting:
            self._idle(owner, command)


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, FairShare] = weakref.WeakKeyDictionary()


def fair_share() -> FairShare:
    """The running loop's scheduler (made on first use)."""
    loop = asyncio.get_running_loop()
    scheduler = _by_loop.get(loop)
    if scheduler is None:
        scheduler = _by_loop[loop] = FairShare()
    return scheduler
