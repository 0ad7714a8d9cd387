"""Per-command control groups: memory, process count and CPU share of one sandbox.

Uses the cgroup v1 controllers the machine mounts (``memory``, ``pids``, ``cpu``), each one
only if the daemon may create groups in it; a controller that is missing or read-only is
skipped and the launcher falls back to rlimits for it. Each command gets a fresh group
under the daemon's own, created before the command runs and removed after its last process
is gone. (A unified cgroup v2 hierarchy is not used yet: it needs delegation set up by the
service manager; rlimits apply there.)
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
from dataclasses import dataclass, field
from pathlib import Path

from toolbridge._sandbox.orphans import owned_name, sweep_dead_owners

CONTROLLERS = ("memory", "pids", "cpu")
PREFIX = "toolbridge-"
"""Groups are named ``toolbridge-{daemon pid}-{random}``, so those of a dead daemon are known."""


def _v1_mounts(mountinfo: str) -> dict[str, Path]:
    """Controller -> mount point of each mounted cgroup v1 hierarchy."""
    mounts: dict[str, Path] = {}
    for line in mountinfo.splitlines():
        fields, _, tail = line.partition(" - ")
        parts, rest = fields.split(), tail.split()
        if len(parts) < 5 or len(rest) < 3 or rest[0] != "cgroup":
            continue
        for option in rest[2].split(","):
            if option in CONTROLLERS:
                mounts.setdefault(option, Path(parts[4]))
    return mounts


def _own_paths(proc_cgroup: str) -> dict[str, str]:
    """Controller -> this process's group path in that hierarchy."""
    paths: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            paths[controller] = path
    return paths


def available_parents() -> dict[str, Path]:
    """Where this process may create per-command groups, by controller."""
    try:
        mounts = _v1_mounts(Path("/proc/self/mountinfo").read_text())
        own = _own_paths(Path("/proc/self/cgroup").read_text())
    except OSError:
        return {}
    parents = {}
    for controller, mount in mounts.items():
        parent = mount / own.get(controller, "/").lstrip("/")
        if os.access(parent, os.W_OK):
            parents[controller] = parent
    return parents


@dataclass
class CommandCgroups:
    """The groups of one command; ``paths`` holds the controllers actually in use."""

    paths: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def create(cls, *, memory: int, processes: int, cpus: float) -> CommandCgroups:
        """Create and configure a group in every usable controller.

        A controller whose group cannot be created or configured is left out (and removed
        again), so the caller knows to use the rlimit instead.
        """
        groups = cls()
        name = owned_name(PREFIX) + secrets.token_hex(4)
        for controller, parent in available_parents().items():
            path = parent / name
            try:
                path.mkdir()
            except OSError:
                continue
            try:
                _configure(controller, path, memory=memory, processes=processes, cpus=cpus)
            except OSError:
                with contextlib.suppress(OSError):
                    path.rmdir()
                continue
            groups.paths[controller] = path
        return groups

    def add(self, pid: int) -> None:
        """Move ``pid`` into every group; what it starts afterwards stays in them."""
        for path in self.paths.values():
            (path / "cgroup.procs").write_text(str(pid))

    def limits_hit(self) -> list[str]:
        """Which limits the kernel had to enforce, in words for the command's stderr."""
        notes = []
        memory = self.paths.get("memory")
        if memory is not None and _counter(memory / "memory.oom_control", "oom_kill") > 0:
            limit = int((memory / "memory.limit_in_bytes").read_text())
            notes.append(
                f"the sandbox reached its memory limit ({limit // (1024 * 1024)} MiB) "
                "and the kernel killed a process in it"
            )
        pids = self.paths.get("pids")
        if pids is not None and _counter(pids / "pids.events", "max") > 0:
            limit_text = (pids / "pids.max").read_text().strip()
            notes.append(f"the sandbox reached its process limit ({limit_text}); creating more failed")
        return notes

    def remaining(self) -> list[int]:
        """Processes still in the command's groups."""
        found: set[int] = set()
        for path in self.paths.values():
            with contextlib.suppress(OSError, ValueError):
                found.update(int(pid) for pid in (path / "cgroup.procs").read_text().split())
        return sorted(found)

    def kill_all(self) -> None:
        for pid in self.remaining():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> bool:
        """Remove the groups; False while some still hold processes (try again later)."""
        for controller, path in list(self.paths.items()):
            try:
                path.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                return False
            del self.paths[controller]
        return True


def sweep_stale() -> list[Path]:
    """Kill what is left in the groups of dead daemons and remove the groups."""

    def remove(path: Path) -> bool:
        groups = CommandCgroups({"any": path})
        groups.kill_all()
        return groups.remove()

    removed: list[Path] = []
    for parent in available_parents().values():
        removed += sweep_dead_owners(parent, PREFIX, remove)
    return removed


def _configure(controller: str, path: Path, *, memory: int, processes: int, cpus: float) -> None:
    if controller == "memory":
        (path / "memory.limit_in_bytes").write_text(str(memory))
        swap = path / "memory.memsw.limit_in_bytes"
        if swap.exists():
            # Memory plus swap: without it, the limit could be dodged by swapping.
            swap.write_text(str(memory))
    elif controller == "pids":
        (path / "pids.max").write_text(str(processes))
    elif controller == "cpu":
        period = int((path / "cpu.cfs_period_us").read_text())
        (path / "cpu.cfs_quota_us").write_text(str(max(1000, int(period * cpus))))


def _counter(path: Path, name: str) -> int:
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0
