"""The bubblewrap launcher: each command in its own namespaces, as an unprivileged user.

A command runs with every namespace unshared (no network at all: only its own loopback),
its own pid namespace (when the command ends, everything it started ends with it, however
it forked), a new session, no capabilities, no way to make further user namespaces, and a
file system holding only what the interpreters need (see :mod:`_bwrap_plan`). When the
daemon runs as root, the command runs as a fresh unprivileged uid of its own (and a shared
sandbox gid): a sandbox started by root would otherwise map to host root, ignore process
limits and be able to write any root-owned directory bound writable.

Limits come from :class:`SandboxLimits` (:mod:`limits`): memory, process count and CPU share through cgroup
v1 controllers where the daemon may create groups, and rlimits always (open files, CPU
seconds, file size, processes; address space only when there is no memory cgroup, since
Node aborts at start under an address-space limit of 512 MiB or less).

If bubblewrap is missing or cannot set up the sandbox, the command fails with a
:class:`SandboxError` saying what to install or change. It never runs unsandboxed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import resource
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolbridge._errors import SandboxError
from toolbridge._sandbox.bwrap.cgroups import CommandCgroups, sweep_stale
from toolbridge._sandbox.bwrap.limits import NPROC_SLACK, SandboxLimits
from toolbridge._sandbox.bwrap.outcome import finish
from toolbridge._sandbox.bwrap.plan import (
    Bind,
    SandboxView,
    Stage,
    group_text,
    hidden_inside,
    hidden_site_packages,
    passwd_text,
    sandbox_args,
    stage_args,
)
from toolbridge._sandbox.bwrap.user import (
    SANDBOX_GID,
    Ownership,
    check_cwd,
    grant_socket_access,
    sandbox_uid,
    socket_path,
)
from toolbridge._sandbox.launcher import LaunchSpec, ProcessOutcome, StopSignal
from toolbridge._sandbox.process import ProcessRun, lower_priority

__all__ = ["BwrapLauncher", "SandboxLimits"]

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install -y bubblewrap`; Fedora: "
    "`dnf install bubblewrap`), or choose sandbox='process' knowing it is no isolation boundary"
)
SETUP_TIMEOUT = 30.0
"""Seconds bubblewrap may take to set up a sandbox before the attempt is abandoned."""
REAP_TIMEOUT = 10.0
"""Seconds to wait for a killed sandbox to be gone (a process in uninterruptible sleep)."""

log = logging.getLogger("toolbridge")


def _data_pipe(text: str) -> int:
    """A pipe's read end already holding ``text`` (small enough for the pipe's buffer)."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, text.encode())
    finally:
        os.close(write_end)
    return read_end


async def _readable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


async def _read_info(fd: int) -> dict[str, Any] | None:
    """The JSON bwrap writes to ``--info-fd``; ``None`` if it exits before writing it."""
    buffer = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            await _readable(fd)
            continue
        if not chunk:
            return None
        buffer += chunk
        with contextlib.suppress(ValueError):
            info = json.loads(buffer)
            if isinstance(info, dict):
                return info


@dataclass
class _Run:
    """The moving parts of one sandboxed command."""

    limits: SandboxLimits
    cgroups: CommandCgroups
    gate_info: int
    gate_block: int
    inner_info: int | None
    init_pidfd: int | None = None
    started: bool = False

    async def handshake(self, process: asyncio.subprocess.Process) -> None:
        """Limit the blocked first sandbox process (bwrap stops it at ``--block-fd``, before
        any of the command runs: all it starts inherits its limits), then let it go on."""
        try:
            info = await asyncio.wait_for(_read_info(self.gate_info), SETUP_TIMEOUT)
            if info is None:
                return  # bwrap gave up; the exit status and stderr say why
            gate = int(info["child-pid"])
            # Limits first: the command must never run without them.
            self.cgroups.add(gate)
            for kind, limit in self._rlimits():
                resource.prlimit(gate, kind, limit)
            lower_priority(gate)
            os.write(self.gate_block, b"1")
            # The inner bwrap's pids are its own namespace's: only its readiness counts.
            inner = self.inner_info
            if inner is not None and await asyncio.wait_for(_read_info(inner), SETUP_TIMEOUT) is None:
                return
            # The first stage's child is pid 1 of the outermost pid namespace of the sandbox.
            with contextlib.suppress(ProcessLookupError):
                self.init_pidfd = os.pidfd_open(gate)
        except TimeoutError:
            raise SandboxError(
                f"bubblewrap did not set up the sandbox within {SETUP_TIMEOUT:.0f} s"
            ) from None
        except OSError as exc:
            raise SandboxError(f"could not apply the sandbox's limits: {exc}") from exc
        self.started = True

    def _rlimits(self) -> list[tuple[int, tuple[int, int]]]:
        limits = self.limits
        cpu = math.ceil(limits.cpu_time)
        # With a pids cgroup, the rlimit is only a backstop: the cgroup counts the whole
        # sandbox (bwrap's own processes too) and says so when it is hit.
        processes = limits.processes + (NPROC_SLACK if "pids" in self.cgroups.paths else 0)
        chosen = [
            (resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files)),
            (resource.RLIMIT_NPROC, (processes, processes)),
            (resource.RLIMIT_CPU, (cpu, cpu + 1)),
            (resource.RLIMIT_FSIZE, (limits.file_size, limits.file_size)),
            (resource.RLIMIT_CORE, (0, 0)),
        ]
        if "memory" not in self.cgroups.paths:
            chosen.append((resource.RLIMIT_AS, (limits.memory, limits.memory)))
        return chosen

    async def reap(self) -> None:
        """Kill the sandbox's pid 1 (the kernel then kills all in its namespace) and wait."""
        if self.init_pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.init_pidfd, signal.SIGKILL)
            try:
                await asyncio.wait_for(_readable(self.init_pidfd), REAP_TIMEOUT)
            except TimeoutError:
                log.warning("the sandbox's pid 1 did not exit %.0f s after SIGKILL", REAP_TIMEOUT)
        self.cgroups.kill_all()


class BwrapLauncher:
    """Runs each command under bubblewrap, as an unprivileged user, within limits.

    Args:
        limits: Resource limits of each sandbox (``SandboxLimits()`` by default).
        executable: The bwrap program, looked up on the daemon's PATH.
    """

    name = "bwrap"
    takes_stdin = True  # LaunchSpec.stdin: it may keep warm sandboxes

    def __init__(self, *, limits: SandboxLimits | None = None, executable: str = "bwrap") -> None:
        self.limits = limits or SandboxLimits()
        self._executable = executable

    def admit(self, spec: LaunchSpec) -> None:
        """Let a sandbox started before its command (a warm one) reach the command's socket,
        made since it started, as :meth:`run` does for a sandbox started for its command."""
        if os.geteuid() == 0:
            grant_socket_access(socket_path(spec), SANDBOX_GID)

    _swept = False  # once per process: the groups of daemons that died without cleaning up

    async def run(self, spec: LaunchSpec, stop: StopSignal) -> ProcessOutcome:
        if not BwrapLauncher._swept:
            BwrapLauncher._swept = True
            for path in sweep_stale():
                log.info("removed the cgroup %s of a daemon that is gone", path)
        bwrap = shutil.which(self._executable)
        if bwrap is None:
            raise SandboxError(f"bubblewrap ({self._executable}) is not on the daemon's PATH: {INSTALL_HINT}")
        socket = socket_path(spec)
        if os.geteuid() != 0:
            return await self._run(spec, stop, bwrap, None, socket, os.getuid(), os.getgid())
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise SandboxError(
                "setpriv (util-linux) is needed to run sandboxes as an unprivileged user when "
                "the daemon runs as root: install util-linux"
            )
        with sandbox_uid() as uid:
            return await self._run(spec, stop, bwrap, setpriv, socket, uid, SANDBOX_GID)

    async def _run(
        self,
        spec: LaunchSpec,
        stop: StopSignal,
        bwrap: str,
        setpriv: str | None,
        socket: Path,
        uid: int,
        gid: int,
    ) -> ProcessOutcome:
        as_root = setpriv is not None
        ownership = Ownership()
        fds: list[int] = []
        cgroups = CommandCgroups()
        try:
            try:
                if as_root:
                    grant_socket_access(socket, gid)
                    for path in spec.writable_paths:
                        ownership.lend(Path(path), uid, gid)
                check_cwd(spec.cwd, uid, gid)
                cgroups = CommandCgroups.create(
                    memory=self.limits.memory, processes=self.limits.processes, cpus=self.limits.cpus
                )
            except OSError as exc:
                raise SandboxError(f"could not prepare the sandbox: {exc}") from exc

            def pipe() -> tuple[int, int]:
                read_end, write_end = os.pipe()
                fds.extend((read_end, write_end))
                return read_end, write_end

            passwd_fd, group_fd = _data_pipe(passwd_text(uid, gid)), _data_pipe(group_text(gid))
            fds += [passwd_fd, group_fd]
            view = _view(spec, passwd_fd, group_fd, self.limits.tmp_size)
            gate_info_r, gate_info_w = pipe()
            gate_block_r, gate_block_w = pipe()
            os.set_blocking(gate_info_r, False)
            passed = [passwd_fd, group_fd, gate_info_w, gate_block_r]
            # The first bwrap reports its pid and waits: limits apply before any command code.
            gate = ["--info-fd", str(gate_info_w), "--block-fd", str(gate_block_r)]
            if as_root:
                assert setpriv is not None
                inner_info_r, inner_info_w = pipe()
                os.set_blocking(inner_info_r, False)
                passed.append(inner_info_w)
                stage = Stage()
                inner = [bwrap, *sandbox_args(view, stage), "--info-fd", str(inner_info_w)]
                argv = [
                    bwrap,
                    *stage_args(stage),
                    *gate,
                    "--",
                    setpriv,
                    f"--reuid={uid}",
                    f"--regid={gid}",
                    "--clear-groups",
                    "--inh-caps=-all",
                    "--bounding-set=-all",
                    "--no-new-privs",
                    # Changing uid clears the parent-death signal bwrap's --die-with-parent
                    # set: set it again, or the inner bwrap outlives a killed daemon.
                    "--pdeathsig=KILL",
                    "--",
                    *inner,
                    "--",
                    *spec.argv,
                ]
                run = _Run(self.limits, cgroups, gate_info_r, gate_block_w, inner_info_r)
            else:
                argv = [
                    bwrap,
                    *sandbox_args(view, None),
                    *gate,
                    "--",
                    *spec.argv,
                ]
                run = _Run(self.limits, cgroups, gate_info_r, gate_block_w, None)

            async def handshake(process: asyncio.subprocess.Process) -> None:
                # Only the sandbox may hold its ends from now on: the pipes report EOF
                # when bwrap exits instead of waiting on our own copies.
                for fd in passed:
                    os.close(fd)
                    fds.remove(fd)
                await run.handshake(process)

            outcome = await ProcessRun(argv, spec, stop, pass_fds=passed, reap=run.reap).run(
                started=handshake
            )
            if run.init_pidfd is not None:
                fds.append(run.init_pidfd)
            return finish(outcome, spec, started=run.started, notes=run.cgroups.limits_hit())
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            await _remove_cgroups(cgroups)
            ownership.restore()


def _view(spec: LaunchSpec, passwd_fd: int, group_fd: int, tmp_size: int) -> SandboxView:
    binds: list[Bind] = []
    masks: list[Path] = []
    for path in spec.read_only_paths:
        binds.append(Bind(Path(path), "ro"))
        masks += hidden_site_packages(Path(path))
    assert spec.socket_dir is not None
    binds.append(Bind(spec.socket_dir, "ro"))
    writable = [Path(path) for path in spec.writable_paths]
    if spec.cwd not in writable:
        binds.append(Bind(spec.cwd, "ro"))
    binds += [Bind(path, "rw") for path in writable]
    hidden_files, hidden_dirs = hidden_inside(binds, spec.hidden_paths)
    return SandboxView(
        binds=binds,
        masks=[*masks, *hidden_dirs],
        hidden_files=hidden_files,
        cwd=spec.cwd,
        tmp_size=tmp_size,
        passwd_fd=passwd_fd,
        group_fd=group_fd,
    )


async def _remove_cgroups(cgroups: CommandCgroups) -> None:
    # A process the kernel is still tearing down keeps its group busy for a moment.
    for delay in (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0):
        await asyncio.sleep(delay)
        cgroups.kill_all()
        if cgroups.remove():
            return
    log.warning("could not remove the sandbox cgroups %s", ", ".join(map(str, cgroups.paths.values())))
