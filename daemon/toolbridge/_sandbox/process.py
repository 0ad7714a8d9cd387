"""Running one command as a child process: the plain launcher, and what every launcher shares.

:class:`ProcessRun` starts a program in a session of its own, reads its output into bounded
buffers while it runs, and kills its whole process group when it exits, times out or is
stopped; :meth:`ProcessRun.run` sees one through its life. The bubblewrap launcher runs
bwrap with it.

The plain :class:`ProcessLauncher` is no isolation boundary. It scrubs the environment and
kills the process group, but the command runs as the daemon's user with the daemon's view of
the file system and network. Use the bubblewrap launcher for code you do not trust.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from toolbridge._errors import SandboxError
from toolbridge._futures import retrieve_outcome
from toolbridge._sandbox.launcher import LaunchSpec, ProcessOutcome, StopSignal
from toolbridge._sandbox.orphans import die_with_parent

__all__ = ["SANDBOX_NICE", "ProcessLauncher", "ProcessRun", "lower_priority"]

_DRAIN_GRACE = 2.0
"""Seconds to wait for output pipes to close after the process tree is gone."""

SANDBOX_NICE = 5
"""How much lower than the daemon's a sandbox's CPU priority is (``nice``): the daemon serves
every command, so a sandbox busy on the same cores must not slow the others' calls (measured,
bench/concurrency.py: a quiet command's p99 beside a 32-caller flood 4.1-5.3 ms at the
daemon's priority, 3.6-4.0 ms at +5, the flood's own calls/s no lower)."""


class _BoundedReader:
    """Reads one output pipe of the command, keeping the first ``limit`` bytes.

    The pipe is ours, not the subprocess transport's: asyncio's ``Process.wait()`` waits
    for the transport's pipes to close, which a double-forked child holding them can put
    off forever. With our own pipes, the exit and the output are awaited separately.
    """

    def __init__(self, limit: int) -> None:
        self.data = bytearray()
        self.truncated = False
        self._limit = limit
        self._read_end, self.write_end = os.pipe()

    async def read_all(self) -> None:
        loop = asyncio.get_running_loop()
        stream = asyncio.StreamReader(limit=65536, loop=loop)
        pipe = os.fdopen(self._read_end, "rb", buffering=0)
        self._read_end = -1  # the transport owns it now
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stream, loop=loop), pipe
        )
        try:
            while chunk := await stream.read(65536):
                room = self._limit - len(self.data)
                if len(chunk) > room:
                    self.truncated = True
                if room > 0:
                    self.data += chunk[:room]
        finally:
            transport.close()

    def close_write_end(self) -> None:
        if self.write_end >= 0:
            os.close(self.write_end)
            self.write_end = -1

    def close(self) -> None:
        """Close whatever ends are still ours (after a failed start or a cancelled read)."""
        self.close_write_end()
        if self._read_end >= 0:
            os.close(self._read_end)
            self._read_end = -1


def _identity(user: int | None, group: int | None) -> dict[str, Any]:
    """The user switch for ``create_subprocess_exec``, and nothing when there is none.

    uvloop's ``subprocess_exec`` refuses ``user``, ``group`` and ``extra_groups`` even when
    they are None, so they are passed only when a switch is asked for.
    """
    if user is None and group is None:
        return {}
    # Switching user must also drop the daemon's supplementary groups.
    return {"user": user, "group": group, "extra_groups": None if user is None else []}


Started = Callable[[asyncio.subprocess.Process], Awaitable[None]]
Reap = Callable[[], Awaitable[None]]


class ProcessRun:
    """One program started for a command: its output read as it runs, its group killed at the end.

    Args:
        argv: What to execute.
        spec: The command's spec (environment, cwd, timeout, output limit).
        stop: Set by the daemon to stop the command early.
        user: Run as this uid (with ``group`` and no supplementary groups); needs root.
        group: The gid to run as, with ``user``.
        pass_fds: File descriptors the process inherits.
        reap: Awaited after the process group is killed and before the output is drained,
            to make sure nothing that still holds the output pipes is left running.
    """

    def __init__(
        self,
        argv: Sequence[str],
        spec: LaunchSpec,
        stop: StopSignal,
        *,
        user: int | None = None,
        group: int | None = None,
        pass_fds: Sequence[int] = (),
        reap: Reap | None = None,
    ) -> None:
        self._argv, self._spec, self._stop = argv, spec, stop
        self._user, self._group, self._pass_fds, self._reap = user, group, pass_fds, reap
        self._stdout = _BoundedReader(spec.output_limit)
        self._stderr = _BoundedReader(spec.output_limit)
        self._process: asyncio.subprocess.Process | None = None
        self._readers: asyncio.Future[Any] | None = None

    @property
    def process(self) -> asyncio.subprocess.Process:
        assert self._process is not None, "start() first"
        return self._process

    async def start(self) -> asyncio.subprocess.Process:
        """Start the program in a new session at a lower priority, and begin reading its output.

        Raises:
            SandboxError: when ``argv[0]`` cannot be executed.
        """
        argv, spec = self._argv, self._spec
        missing = f"cannot start {argv[0]!r}: not found on the sandbox PATH {spec.env.get('PATH', '')!r}"
        program = _find_program(argv[0], spec)
        if program is None:
            raise SandboxError(missing)
        try:
            self._process = await asyncio.create_subprocess_exec(
                # The daemon's death (even by SIGKILL) kills the command: nothing else would.
                *die_with_parent([program, *argv[1:]]),
                env=dict(spec.env),
                cwd=spec.cwd,
                stdin=asyncio.subprocess.DEVNULL if spec.stdin is None else spec.stdin,
                stdout=self._stdout.write_end,
                stderr=self._stderr.write_end,
                start_new_session=True,
                pass_fds=tuple(self._pass_fds),
                **_identity(self._user, self._group),
            )
        except BaseException as exc:
            self._close_pipes()
            if isinstance(exc, FileNotFoundError):
                raise SandboxError(missing) from exc
            if isinstance(exc, OSError):
                raise SandboxError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from exc
            raise
        lower_priority(self._process.pid, group=True)
        # Only the command holds the write ends now: the readers see EOF when it (and anything
        # it left behind) closes them.
        self._stdout.close_write_end()
        self._stderr.close_write_end()
        self._readers = asyncio.gather(self._stdout.read_all(), self._stderr.read_all())
        return self._process

    async def handshake(self, started: Started) -> None:
        """Await the launcher's own setup before the command may run (its output is read
        meanwhile); if it raises, the process is killed and reaped, and the error re-raised."""
        try:
            await started(self.process)
        except BaseException:
            _kill_group(self.process.pid)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self.process.wait())
            if self._reap is not None:
                await self._reap()
            assert self._readers is not None
            self._readers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._readers
            self._close_pipes()
            raise

    async def wait(self) -> None:
        """Until the program exits, is stopped or times out; then its process group is killed."""
        process, stop = self.process, self._stop
        exited = asyncio.ensure_future(process.wait())
        stopped = asyncio.ensure_future(stop.event.wait())
        clock = asyncio.ensure_future(stop.elapse(self._spec.timeout))
        try:
            done, _ = await asyncio.wait({exited, stopped, clock}, return_when=asyncio.FIRST_COMPLETED)
            if exited not in done:
                stop.stop("timeout")
        except asyncio.CancelledError:
            stop.stop("cancelled")
            _kill_group(process.pid)
            assert self._readers is not None
            _abandon(self._readers)
            raise
        finally:
            stopped.cancel()
            clock.cancel()
            # The command's tree ends with it: kill whatever is left in its process group.
            _kill_group(process.pid)
            if not exited.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(exited)
            if self._reap is not None:
                await self._reap()

    async def outcome(self) -> ProcessOutcome:
        """What the program wrote (drained, briefly) and how it ended."""
        readers = self._readers
        assert readers is not None
        try:
            await asyncio.wait_for(asyncio.shield(readers), _DRAIN_GRACE)
        except TimeoutError:
            # Something outside the group (a double-forked child) still holds a pipe open.
            readers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await readers
        self._close_pipes()
        returncode = self.process.returncode
        stop = self._stop
        return ProcessOutcome(
            exit_code=returncode if returncode is not None else -signal.SIGKILL,
            stdout=bytes(self._stdout.data),
            stderr=bytes(self._stderr.data),
            stopped=stop.reason if stop.reason != "cancelled" else None,
            stdout_truncated=self._stdout.truncated,
            stderr_truncated=self._stderr.truncated,
        )

    def _close_pipes(self) -> None:
        self._stdout.close()
        self._stderr.close()

    async def run(self, *, started: Started | None = None) -> ProcessOutcome:
        """Start the program and see it through to its outcome.

        Args:
            started: Awaited once the process exists and before the command may run (the
                launcher's own setup handshake, see :meth:`handshake`).

        Raises:
            SandboxError: when ``argv[0]`` cannot be executed.
        """
        await self.start()
        if started is not None:
            await self.handshake(started)
        await self.wait()
        return await self.outcome()


def _find_program(name: str, spec: LaunchSpec) -> str | None:
    """The program ``exec`` would run (a path is the command's cwd's), looked up here since
    the parent-death wrapper execs it; ``None`` when there is none."""
    if "/" not in name:
        return shutil.which(name, path=spec.env.get("PATH", ""))
    path = spec.cwd / name
    return str(path) if path.exists() else None


def _abandon(readers: asyncio.Future[Any]) -> None:
    """Stop reading a cancelled command's output; its readers close their own pipes."""
    readers.cancel()
    readers.add_done_callback(retrieve_outcome)


def lower_priority(pid: int, *, group: bool = False) -> None:
    """Give ``pid`` (or its whole process group) ``SANDBOX_NICE`` less CPU priority than ours.

    Set from outside just after the start, so a child forked in that moment is in the group
    (it is a new session) and one forked later inherits it; the sandbox cannot raise it back.
    """
    niceness = min(19, os.getpriority(os.PRIO_PROCESS, 0) + SANDBOX_NICE)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.setpriority(os.PRIO_PGRP if group else os.PRIO_PROCESS, pid, niceness)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class ProcessLauncher:
    """Runs commands as plain child processes. Not an isolation boundary.

    The environment is exactly the spec's; the process gets its own session and process
    group, which is killed when the command ends, times out or is stopped.
    """

    name = "process"
    takes_stdin = True  # LaunchSpec.stdin: it may keep warm sandboxes

    async def run(self, spec: LaunchSpec, stop: StopSignal) -> ProcessOutcome:
        return await ProcessRun(spec.argv, spec, stop).run()
