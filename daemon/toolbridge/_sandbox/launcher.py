"""The launcher interface: what starts a sandboxed command, and what it is given and returns.

A launcher turns a :class:`LaunchSpec` into a finished :class:`ProcessOutcome`. It owns the
process tree it starts: when the command exits, times out or is stopped, nothing it started
is left running. toolbridge ships two (``BwrapLauncher``, and the plain ``ProcessLauncher`` in
:mod:`.process`, which is no isolation boundary); ``Bridge(launcher=...)`` takes your own.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

__all__ = ["LaunchSpec", "Launcher", "ProcessOutcome", "StopReason", "StopSignal"]

StopReason = Literal["timeout", "max_calls", "cancelled", "suspended"]
"""``suspended``: the daemon stopped the command to resume its work later (in a new run entry)."""


@dataclass(frozen=True, kw_only=True)
class LaunchSpec:
    """Everything a launcher needs to start one command.

    Attributes:
        argv: The program and its arguments; ``argv[0]`` is looked up on ``env["PATH"]``.
        env: The complete environment of the command (already scrubbed).
        cwd: The working directory. A real sandbox shows it read-only unless it is also
            in ``writable_paths``.
        timeout: Seconds before the command's tree is killed.
        output_limit: Bytes of stdout and of stderr kept; the rest is read and dropped.
        read_only_paths: Paths the command must be able to read (interpreters, client
            libraries). A real sandbox exposes these and little else.
        writable_paths: Paths the command may write (a scratch directory the daemon made
            for it, such as a snippet's); writes there are seen by the host.
        socket_dir: The directory holding the daemon's Unix socket, if it uses one.
        hidden_paths: The daemon's own state (its journal, the journal's ``-wal`` and
            ``-shm``, its secret key): a real sandbox never shows them, even when they lie
            inside a path it shows (the working directory, say).
        stdin: A file descriptor to give the command as its stdin (it stays the caller's
            to close); ``/dev/null`` when ``None``. A warm sandbox waits on it for its
            command: a launcher that honours it says so with a class attribute
            ``takes_stdin = True``, and only such a launcher is given warm sandboxes.
    """

    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: Path
    timeout: float
    output_limit: int = 1024 * 1024
    read_only_paths: Sequence[Path] = ()
    writable_paths: Sequence[Path] = ()
    socket_dir: Path | None = None
    hidden_paths: Sequence[Path] = ()
    stdin: int | None = None

    def __post_init__(self) -> None:
        # Launchers chdir in their own ways (bwrap inside its mount namespace): a relative
        # path is the host's, resolved once here for all of them.
        object.__setattr__(self, "cwd", Path(os.path.abspath(self.cwd)))


@dataclass(frozen=True)
class ProcessOutcome:
    """How a command ended and what it wrote.

    Attributes:
        exit_code: The process's exit code; negative (``-signal``) when a signal killed it.
        stdout: The first ``LaunchSpec.output_limit`` bytes it wrote to stdout.
        stderr: The same of stderr.
        stopped: Why the launcher stopped it, if it did (``StopSignal.reason``, except
            ``"cancelled"``): ``"timeout"``, ``"max_calls"`` or ``"suspended"``.
        stdout_truncated: Whether it wrote more to stdout than was kept.
        stderr_truncated: The same of stderr.
    """

    exit_code: int
    stdout: bytes
    stderr: bytes
    stopped: StopReason | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False


@dataclass
class StopSignal:
    """Lets the daemon stop a running command early, saying why, and pause its timeout.

    A launcher waits on :attr:`event` and on :meth:`elapse` beside the process.

    While one or more holds are taken (:meth:`pause`), the command's clock stands still:
    the time does not count against ``LaunchSpec.timeout``.
    """

    event: asyncio.Event = field(default_factory=asyncio.Event)
    reason: StopReason | None = None
    holds: int = 0
    _changed: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    def stop(self, reason: StopReason) -> None:
        self.note(reason)
        self.event.set()

    def note(self, reason: StopReason) -> None:
        """Record why the command is being stopped, before (or without) stopping it.

        A command over its call budget gets a moment to see its last error; if it exits on
        its own meanwhile, its outcome must still say why it was to be stopped.
        """
        if self.reason is None:
            self.reason = reason

    def pause(self) -> None:
        """Take a hold: stop the clock until every hold is released."""
        self.holds += 1
        self._changed.set()

    def resume(self) -> None:
        """Release a hold taken with :meth:`pause`."""
        self.holds -= 1
        self._changed.set()

    async def elapse(self, seconds: float) -> None:
        """Return once ``seconds`` have passed with no hold taken."""
        loop = asyncio.get_running_loop()
        left = seconds
        while True:
            self._changed.clear()
            if self.holds > 0:
                await self._changed.wait()
                continue
            started = loop.time()
            try:
                async with asyncio.timeout(left):
                    await self._changed.wait()
            except TimeoutError:
                return
            left -= loop.time() - started


class Launcher(Protocol):
    """Runs commands; give your own to ``Bridge(launcher=...)``.

    An implementation starts ``spec.argv`` with exactly ``spec.env`` in ``spec.cwd``, shows
    it ``read_only_paths`` and ``writable_paths`` (and never ``hidden_paths``), and owns the
    process tree: when the command exits, times out (``stop.elapse(spec.timeout)``) or is
    stopped (``stop.event``), nothing it started is left running. It never falls back to a
    weaker sandbox: it raises instead. ``toolbridge.testing.FakeLauncher`` is one that runs
    nothing.

    Attributes:
        name: A short name for messages and ``toolbridge doctor`` (``"bwrap"``,
            ``"process"``); ``"bwrap"`` tells the daemon the sandbox confines egress.
    """

    name: str

    async def run(self, spec: LaunchSpec, stop: StopSignal) -> ProcessOutcome:
        """Run the command to its end (or until stopped or timed out).

        Args:
            spec: What to start, and what it may see and write.
            stop: Set by the daemon to stop the command early (``stop.event``, with the
                reason in ``stop.reason``); ``stop.elapse(spec.timeout)`` returns when its
                time is up, not counting the time it was paused for (a call waiting on a
                person): then call ``stop.stop("timeout")`` and end it.

        Returns:
            How the command ended: its exit code, output, and ``stop.reason`` when it
            was stopped.

        Raises:
            SandboxError: when the command cannot be started, saying what to fix.
        """
        ...
