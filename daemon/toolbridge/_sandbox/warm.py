"""Warm sandboxes: started ahead of need, each waiting for the one command it will run.

A :class:`WarmSandbox` is a sandbox its launcher started with a small first stage (the
interpreter, the client and the snippet runner loaded) that blocks reading stdin. Taken for
a command, it is sent that command's environment and arguments (its token reaches it only
then) and runs it as a sandbox started for it would; then it is gone: it is never given a
second command. Its launcher still owns its process tree, limits and end; its command's
clock starts at the assignment, and every stop of the command reaches it.

A sandbox fits a command only when everything its launcher fixed at the start is the
command's too: the working directory, what it may read and write, the socket directory, the
daemon's hidden files, and every variable an interpreter reads as it starts
(:func:`read_at_start`). A command that does not fit (a door's shims, replay records, a
``PYTHONPATH`` of its own) is run as before by the launcher itself.

:class:`WarmPools` keeps up to ``size`` ready per key: filled once a first command of a key
has run (not before: a bridge that runs no snippet starts none), and topped up as each command
it served ends; a key nobody asked for in :data:`IDLE` seconds lets its sandboxes go. A dry
pool is no wait: the caller starts a cold sandbox instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import shutil
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path

from toolbridge._futures import retrieve_outcome
from toolbridge._sandbox.launcher import Launcher, LaunchSpec, ProcessOutcome, StopSignal

log = logging.getLogger("toolbridge")

__all__ = ["IDLE", "REFILL_DELAY", "WarmPools", "WarmSandbox", "read_at_start"]

IDLE = 300.0
"""Seconds a pool's sandboxes wait without a command of their key before they are let go."""
REFILL_DELAY = 0.05
"""Seconds after a taken sandbox has ended that the one replacing it is started."""
CLOSE_TIMEOUT = 30.0
"""Seconds a closing pool waits for its killed sandboxes to be gone before it lets them be."""
LIFETIME = 10 * 365 * 86400.0
"""The launcher's own time limit of a warm sandbox: none to speak of. Its command's timeout
is counted from the assignment, by :meth:`WarmSandbox.run`."""

_START_PREFIXES = ("PYTHON", "NODE_", "LD_", "UV_", "MALLOC", "GLIBC", "LC_", "OPENSSL", "SSL_")
_START_NAMES = frozenset({"PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "NODE_OPTIONS"})


def read_at_start(name: str) -> bool:
    """Whether an interpreter may read the variable ``name`` as it starts (``PYTHONPATH``,
    ``NODE_OPTIONS``, ``LD_PRELOAD``, ``LC_ALL``, ``TZ``, ...): too late at an assignment."""
    return name in _START_NAMES or name.startswith(_START_PREFIXES)


class WarmSandbox:
    """One sandbox started ahead of need; a :class:`Launcher` for the one command it fits.

    Args:
        launcher: What starts it (and what runs a command it does not fit).
        spec: Its start: the first stage's ``argv`` and environment (no token), and the
            working directory, paths and socket directory its command will have.
        runner: The command line it stands for; a command's ``argv`` must begin with it (the
            rest is handed over).
        owned: Directories made for it, removed when it is let go unused.
    """

    def __init__(
        self, launcher: Launcher, spec: LaunchSpec, runner: Sequence[str], owned: Sequence[Path] = ()
    ) -> None:
        self.name = launcher.name
        self.spec = spec
        self._launcher = launcher
        self._runner = list(runner)
        self._owned = list(owned)
        self._stop = StopSignal()
        self._taken = False
        self._handed = False  # its directories are a command's now
        read_end, self._write_end = os.pipe()
        self._read_end: int | None = read_end
        started = launcher.run(dataclasses.replace(spec, stdin=read_end), self._stop)
        self._task = asyncio.ensure_future(started)
        self._task.add_done_callback(self._ended)

    @property
    def work_dir(self) -> Path:
        """Its command's working directory (writable), made for it."""
        return self.spec.cwd

    @property
    def socket_dir(self) -> Path | None:
        """The directory its command's socket will be in."""
        return self.spec.socket_dir

    @property
    def alive(self) -> bool:
        """Not taken, and still waiting (its first stage has not ended)."""
        return not self._taken and not self._task.done()

    def fits(self, spec: LaunchSpec) -> bool:
        """Whether ``spec`` is a command this sandbox can run exactly as a fresh one would."""
        mine = self.spec
        same = (
            list(spec.argv[: len(self._runner)]) == self._runner
            and spec.cwd == mine.cwd
            and list(spec.writable_paths) == list(mine.writable_paths)
            and list(spec.read_only_paths) == list(mine.read_only_paths)
            and spec.socket_dir == mine.socket_dir
            and list(spec.hidden_paths) == list(mine.hidden_paths)
            and spec.output_limit == mine.output_limit
            and spec.stdin is None
        )
        return same and _same_start(spec.env, mine.env)

    async def run(self, spec: LaunchSpec, stop: StopSignal) -> ProcessOutcome:
        """Run the command ``spec`` here, or (when it does not fit) in a sandbox of its own.

        ``stop`` and ``spec.timeout`` govern it as they would a fresh sandbox: the clock
        starts now, and a stop (its reason too) reaches the process tree.
        """
        if self._taken:
            raise RuntimeError("a warm sandbox runs one command only")
        self._handed = True
        if not self.alive or not self.fits(spec):
            self.discard()
            return await self._launcher.run(spec, stop)
        self._taken = True
        assignment = {"env": dict(spec.env), "argv": list(spec.argv[len(self._runner) :])}
        forward = asyncio.ensure_future(_forward(stop, self._stop, spec.timeout))
        try:
            admit = getattr(self._launcher, "admit", None)  # the launcher's last word, if any
            if admit is not None:
                admit(spec)
            write_end, self._write_end = self._write_end, -1
            await _hand_over(write_end, json.dumps(assignment).encode() + b"\n")
            outcome = await self._task
        except BaseException:
            self._task.cancel()  # (nothing when it has ended)
            await self.gone()
            raise
        finally:
            forward.cancel()
            self._close()
        # The command's own stop says why it ended, as it does for a fresh sandbox.
        return dataclasses.replace(outcome, stopped=None if stop.reason == "cancelled" else stop.reason)

    def discard(self) -> None:
        """Let it go unused (its tree is killed); nothing when it was taken."""
        if self._taken:
            return
        self._taken = True
        self._task.cancel()

    def when_gone(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` once its first stage has ended (at once if it has)."""
        self._task.add_done_callback(lambda _: callback())

    async def gone(self) -> None:
        """Until its first stage, and all it started, has ended."""
        with contextlib.suppress(BaseException):
            await asyncio.shield(self._task)

    def _ended(self, task: asyncio.Future[ProcessOutcome]) -> None:
        retrieve_outcome(task)
        self._close()
        if not self._handed:  # never a command's: its directories go
            for path in self._owned:
                shutil.rmtree(path, ignore_errors=True)

    def _close(self) -> None:
        for fd in (self._read_end, self._write_end):
            if fd is not None and fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._read_end, self._write_end = None, -1


def _same_start(env: Mapping[str, str], base: Mapping[str, str]) -> bool:
    """Every variable read at the start is the same in ``env`` as in ``base`` (where the
    sandbox started), and every one ``base`` has, ``env`` has too."""
    if any(env.get(name) != value for name, value in base.items()):
        return False
    return not any(read_at_start(name) for name in env if name not in base)


async def _hand_over(fd: int, message: bytes) -> None:
    """Write ``message`` to the sandbox's stdin, then close it (a pipe holds far more than a
    command's environment, but a full one must not block the daemon)."""
    os.set_blocking(fd, False)
    loop = asyncio.get_running_loop()
    view = memoryview(message)
    try:
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                ready = loop.create_future()
                loop.add_writer(fd, ready.set_result, None)
                try:
                    await ready
                finally:
                    loop.remove_writer(fd)
            except BrokenPipeError:
                return  # it is gone: its outcome says how
    finally:
        os.close(fd)


async def _forward(outer: StopSignal, inner: StopSignal, timeout: float) -> None:
    """Stop ``inner`` (the sandbox's) when ``outer`` (its command's) is stopped or its time
    is up, counting from now and not while ``outer`` is paused."""
    stopped = asyncio.ensure_future(outer.event.wait())
    clock = asyncio.ensure_future(outer.elapse(timeout))
    try:
        done, _ = await asyncio.wait({stopped, clock}, return_when=asyncio.FIRST_COMPLETED)
        if stopped not in done:
            outer.stop("timeout")
        inner.stop(outer.reason or "cancelled")
    finally:
        stopped.cancel()
        clock.cancel()


class _Pool:
    def __init__(self) -> None:
        self.ready: deque[WarmSandbox] = deque()
        self.expiry: asyncio.TimerHandle | None = None


class WarmPools:
    """Warm sandboxes by key, up to ``size`` per key (``0``: none, and this costs nothing).

    Args:
        size: Sandboxes kept ready per key.
        idle: Seconds a key's sandboxes wait unasked before they are let go.
    """

    def __init__(self, size: int, *, idle: float = IDLE) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"warm_sandboxes must be a whole number >= 0, not {size!r}")
        self.size = size
        self._idle = idle
        self._pools: dict[Hashable, _Pool] = {}
        self._leaving: set[WarmSandbox] = set()
        self._closed = False

    def take(self, key: Hashable, start: Callable[[], WarmSandbox]) -> WarmSandbox | None:
        """A ready sandbox of ``key``, replaced with ``start`` once it has ended; ``None``
        when there is none (the caller starts a cold sandbox, and calls :meth:`refill` when
        it has ended)."""
        if self._closed or self.size == 0:
            return None
        pool = self._pools.setdefault(key, _Pool())
        taken = None
        while pool.ready and taken is None:
            candidate = pool.ready.popleft()
            if candidate.alive:
                taken = candidate
            else:
                self._let_go(candidate)
        if taken is not None:
            taken.when_gone(lambda: self.refill(key, start))
        if pool.expiry is not None:
            pool.expiry.cancel()
        pool.expiry = asyncio.get_running_loop().call_later(self._idle, self._expire, key)
        return taken

    def refill(self, key: Hashable, start: Callable[[], WarmSandbox]) -> None:
        """Top the pool of ``key`` up with ``start``, a moment after a command of its has ended.

        Not sooner: starting one costs the daemon's loop a fork (4-7 ms) and the machine an
        interpreter's start, which neither that command nor its caller, just answered, need
        wait on; nor while a burst of commands runs cold, which it would only slow.
        """
        asyncio.get_running_loop().call_later(REFILL_DELAY, self._top_up, key, start)

    def _top_up(self, key: Hashable, start: Callable[[], WarmSandbox]) -> None:
        pool = self._pools.get(key)
        if pool is None or self._closed:
            return  # let go meanwhile (idle, or the bridge closing)
        for sandbox in [sandbox for sandbox in pool.ready if not sandbox.alive]:
            pool.ready.remove(sandbox)
            self._let_go(sandbox)
        while len(pool.ready) < self.size:
            pool.ready.append(start())

    def ready(self, key: Hashable) -> list[WarmSandbox]:
        """The sandboxes of ``key`` waiting now (for measures and tests)."""
        pool = self._pools.get(key)
        return [sandbox for sandbox in pool.ready if sandbox.alive] if pool else []

    def _expire(self, key: Hashable) -> None:
        pool = self._pools.pop(key, None)
        if pool is not None:
            for sandbox in pool.ready:
                self._let_go(sandbox)

    def _let_go(self, sandbox: WarmSandbox) -> None:
        sandbox.discard()
        self._leaving.add(sandbox)
        sandbox.when_gone(lambda: self._leaving.discard(sandbox))

    async def close(self) -> None:
        """Let every waiting sandbox go, and wait until they have."""
        self._closed = True
        for key in list(self._pools):
            pool = self._pools[key]
            if pool.expiry is not None:
                pool.expiry.cancel()
            self._expire(key)
        leaving = [asyncio.ensure_future(sandbox.gone()) for sandbox in list(self._leaving)]
        if leaving:
            _, pending = await asyncio.wait(leaving, timeout=CLOSE_TIMEOUT)
            if pending:  # killed, and not gone: never hold the bridge's close for them
                left = len(pending)
                log.warning("%d warm sandbox(es) had not ended %.0f s after SIGKILL", left, CLOSE_TIMEOUT)
        self._closed = False  # a bridge entered again starts afresh
