"""How much one bubblewrap sandbox may use: :class:`SandboxLimits`."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MIB", "NPROC_SLACK", "SandboxLimits"]

MIB = 1024 * 1024

NPROC_SLACK = 8
"""Processes over the pids cgroup's limit that ``RLIMIT_NPROC`` allows, so the cgroup acts first."""


@dataclass(frozen=True, kw_only=True)
class SandboxLimits:
    """Resource limits of one bubblewrap sandbox (the command and everything it starts).

    Attributes:
        memory: Bytes of memory (RAM and swap, ``/tmp`` included) for the whole sandbox, by
            a memory cgroup; without one, each process's address space is capped instead
            (Node needs more than 512 MiB of address space to start).
        processes: Processes and threads at once (pids cgroup, and ``RLIMIT_NPROC``).
        open_files: Open file descriptors per process (``RLIMIT_NOFILE``).
        cpu_time: CPU seconds per process (``RLIMIT_CPU``): SIGXCPU, then SIGKILL.
        cpus: Share of CPU for the whole sandbox, in CPUs (cpu cgroup quota).
        tmp_size: Bytes the private ``/tmp`` may hold.
        file_size: Largest file a process may write, in bytes (``RLIMIT_FSIZE``).
    """

    memory: int = 1024 * MIB
    processes: int = 256
    open_files: int = 1024
    cpu_time: float = 300.0
    cpus: float = 1.0
    tmp_size: int = 256 * MIB
    file_size: int = 256 * MIB

    def __post_init__(self) -> None:
        for name in ("memory", "processes", "open_files", "tmp_size", "file_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"SandboxLimits.{name} must be a whole number of at least 1")
        if self.processes < 8:
            raise ValueError("SandboxLimits.processes must be at least 8 (bubblewrap needs a few)")
        if self.open_files < 16:
            raise ValueError("SandboxLimits.open_files must be at least 16")
        for name in ("cpu_time", "cpus"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"SandboxLimits.{name} must be a positive number")
