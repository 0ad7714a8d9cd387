"""Starting sandboxed commands: the launcher interface and the plain process launcher.

A launcher turns a :class:`LaunchSpec` into a finished :class:`ProcessOutcome`. It owns the
process tree it starts: when the command exits, times out or is stopped, nothing it started
is left running.

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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from toolbridge._errors import SandboxError
from toolbridge._futures import retrieve_outcome
from toolbridge._sandbox.orphans import die_with_parent

StopReason = Literal["timeout", "max_calls", "cancelled", "suspended"]
"""``suspended``: the daemon stopped the command to resume its work later (in a new run entry)."""

_DRAIN_GRACE = 2.0
"""Seconds to wait for output pipes to close after the process tree is gone."""

SANDBOX_NICE = 5
"""How much lower than the daemon's a sandbox's CPU priority is (``nice``): the daemon serves
every command, so a sandbox busy on the same cores must not slow the others' calls (measured,
bench/concurrency.py: a quiet command's p99 beside a 32-caller flood 4.1-5.3 ms at the
daemon's priority, 3.6-4.0 ms at +5, the flood's own calls/s no lower)."""


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

    def __post_init__(self) -> None:
        # Launchers chdir in their own ways (bwrap inside its mount namespace): a relative
        # path is the host's, resolved once here for all of them.
        object.__setattr__(self, "cwd", Path(os.path.abspath(self.cwd)))


@dataclass(frozen=True)
class ProcessOutcome:
    """How a command ended and what it wrote."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    stopped: StopReason | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False


@dataclass
class StopSignal:
    """Lets the daemon stop a running command early, saying why, and pause its timeout.

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
    """Runs commands. Implementations never fall back to a weaker sandbox."""

    name: str

    async def run(self, spec: LaunchSpec, stop: StopSignal) -> ProcessOutcome:
        """Run the command to its end (or until stopped or timed out).

        Raises:
            SandboxError: when the command cannot be started, saying what to fix.
        """
        ...


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


async def run_process(
    argv: Sequence[str],
    spec: LaunchSpec,
    stop: StopSignal,
    *,
    user: int | None = None,
    group: int | None = None,
    pass_fds: Sequence[int] = (),
    started: Callable[[asyncio.subprocess.Process], Awaitable[None]] | None = None,
    reap: Callable[[], Awaitable[None]] | None = None,
) -> ProcessOutcome:
    """Start ``argv`` in a new session, capture its output, and kill its group when done.

    Shared by the launchers: the bubblewrap launcher passes its own ``argv`` (bwrap and its
    options in front of the command) and hooks.

    Args:
        argv: What to execute.
        spec: The command's spec (environment, cwd, timeout, output limit).
        stop: Set by the daemon to stop the command early.
        user: Run as this uid (with ``group`` and no supplementary groups); needs root.
        group: The gid to run as, with ``user``.
        pass_fds: File descriptors the process inherits.
        started: Awaited once the process exists and before the command may run (the
            launcher's own setup handshake; the output is being read meanwhile). Raising
            kills the process and re-raises.
        reap: Awaited after the process group is killed and before the output is drained,
            to make sure nothing that still holds the output pipes is left running.

    Raises:
        SandboxError: when ``argv[0]`` cannot be executed.
    """
    program = _find_program(argv[0], spec)
    if program is None:
        raise SandboxError(
            f"cannot start {argv[0]!r}: not found on the sandbox PATH {spec.env.get('PATH', '')!r}"
        )
    stdout = _BoundedReader(spec.output_limit)
    stderr = _BoundedReader(spec.output_limit)
    try:
        process = await asyncio.create_subprocess_exec(
            # The daemon's death (even by SIGKILL) kills the command: nothing else would.
            *die_with_parent([program, *argv[1:]]),
            env=dict(spec.env),
            cwd=spec.cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=stdout.write_end,
            stderr=stderr.write_end,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
            **_identity(user, group),
        )
    except FileNotFoundError as exc:
        stdout.close()
        stderr.close()
        raise SandboxError(
            f"cannot start {argv[0]!r}: not found on the sandbox PATH {spec.env.get('PATH', '')!r}"
        ) from exc
    except OSError as exc:
        stdout.close()
        stderr.close()
        raise SandboxError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from exc
    except BaseException:
        stdout.close()
        stderr.close()
        raise
    lower_priority(process.pid, group=True)
    # Only the command holds the write ends now: the readers see EOF when it (and anything
    # it left behind) closes them.
    stdout.close_write_end()
    stderr.close_write_end()
    readers = asyncio.gather(stdout.read_all(), stderr.read_all())
    if started is not None:
        try:
            await started(process)
        except BaseException:
            _kill_group(process.pid)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(process.wait())
            if reap is not None:
                await reap()
            readers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await readers
            stdout.close()
            stderr.close()
            raise
    exited = asyncio.ensure_future(process.wait())
    stopped = asyncio.ensure_future(stop.event.wait())
    clock = asyncio.ensure_future(stop.elapse(spec.timeout))
    try:
        done, _ = await asyncio.wait({exited, stopped, clock}, return_when=asyncio.FIRST_COMPLETED)
        if exited not in done:
            stop.stop("timeout")
    except asyncio.CancelledError:
        stop.stop("cancelled")
        _kill_group(process.pid)
        _abandon(readers)
        raise
    finally:
        stopped.cancel()
        clock.cancel()
        # The command's tree ends with it: kill whatever is left in its process group.
        _kill_group(process.pid)
        if not exited.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(exited)
        if reap is not None:
            await reap()
    try:
        await asyncio.wait_for(asyncio.shield(readers), _DRAIN_GRACE)
    except TimeoutError:
        # Something outside the group (a double-forked child) still holds a pipe open.
        readers.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await readers
    stdout.close()
    stderr.close()
    exit_code = process.returncode if process.returncode is not None else -signal.SIGKILL
    return ProcessOutcome(
        exit_code=exit_code,
        stdout=bytes(stdout.data),
        stderr=bytes(stderr.data),
        stopped=stop.reason if stop.reason != "cancelled" else None,
        stdout_truncated=stdout.truncated,
        stderr_truncated=stderr.truncated,
    )


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

    async def run(self, spec: LaunchSpec, stop: StopSignal) -> ProcessOutcome:
        return await run_process(spec.argv, spec, stop)
