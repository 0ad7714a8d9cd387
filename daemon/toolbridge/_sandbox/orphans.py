"""Nothing a daemon started may outlive it: parent-death signals, and sweeping up after the dead.

A daemon killed with SIGKILL runs no cleanup, so the kernel must do it: every process the
daemon starts asks for SIGKILL when its parent dies (``PR_SET_PDEATHSIG``), through an exec
wrapper (:func:`die_with_parent`). The
bubblewrap launcher chains the same signal through every stage it starts (``--die-with-parent``,
``setpriv --pdeathsig``), and its pid namespace and cgroups take the rest.

What only the daemon could remove (its private socket directory, its cgroups) is named after
its pid; a daemon that starts removes those whose owner is dead (only those: a live pid may
be another daemon at work).

The parent-death signal has two holes: it is armed by the wrapper a moment after the fork (a
daemon killed in between leaves the command running), and a command's own children do not
inherit it. Under the bubblewrap launcher the pid namespace and the cgroup take those; under
the plain process launcher the backstop is :func:`kill_processes_naming`: every process a
command starts inherits an environment that names the daemon's private socket directory (a
random name), so the next daemon kills what still names a dead one's.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import sys
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

__all__ = ["die_with_parent", "kill_processes_naming", "owned_name", "owner_is_dead", "sweep_dead_owners"]

_ARM = (
    "import ctypes, os, sys\n"
    "ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)\n"  # PR_SET_PDEATHSIG, SIGKILL
    "if os.getppid() != int(sys.argv[1]): os._exit(1)\n"  # the parent died before that
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


@functools.cache
def _setpriv() -> str | None:
    return shutil.which("setpriv")


def die_with_parent(argv: Sequence[str]) -> list[str]:
    """``argv`` behind an exec wrapper that asks for SIGKILL when the daemon dies.

    Set in the child itself, never in a ``preexec_fn``: Python code between fork and exec
    in a daemon full of threads (gRPC's, the journal's) can deadlock or crash the child.
    ``setpriv --pdeathsig`` (util-linux) costs an exec; without it, a short Python stage
    does the same. ``argv[0]`` must be a path.
    """
    setpriv = _setpriv()
    if setpriv is not None:
        return [setpriv, "--pdeathsig=KILL", "--", *argv]
    return [sys.executable, "-I", "-S", "-c", _ARM, str(os.getpid()), *argv]


def owned_name(prefix: str) -> str:
    """A name that records its owner: ``{prefix}{pid}-``, for ``mkdtemp`` and friends."""
    return f"{prefix}{os.getpid()}-"


def owner_is_dead(pid: int) -> bool:
    """Whether no process ``pid`` exists (a live one, even another user's, is not dead)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def sweep_dead_owners(
    directory: Path, prefix: str, remove: Callable[[Path], bool] | None = None
) -> list[Path]:
    """Remove the entries ``{prefix}{pid}-...`` of ``directory`` whose owner ``pid`` is dead.

    Args:
        directory: Where to look.
        prefix: The name's start, before the owner's pid.
        remove: Removes one entry and says whether it could; a whole tree by default (only
            entries owned by this process's user).

    Returns:
        The entries removed.
    """
    pattern = re.compile(re.escape(prefix) + r"(\d+)-")
    removed: list[Path] = []
    with contextlib.suppress(OSError):
        for entry in directory.iterdir():
            found = pattern.match(entry.name)
            if found is None or not owner_is_dead(int(found.group(1))):
                continue
            if remove is not None:
                if remove(entry):
                    removed.append(entry)
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir() and not entry.is_symlink() and entry.stat().st_uid == os.getuid():
                    shutil.rmtree(entry)
                    removed.append(entry)
    return removed


def kill_processes_naming(directories: Collection[Path]) -> list[int]:
    """SIGKILL every process whose environment names one of ``directories``; their pids.

    Meant for the private directories of dead daemons only: nothing else has a reason to
    carry their random names. Processes of other users that this one cannot read are skipped.
    """
    names = [os.fsencode(directory) for directory in directories]
    killed: list[int] = []
    if not names:
        return killed
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                variables = environ.read().split(b"\0")
        except OSError:
            continue
        if any(name in variable for variable in variables for name in names):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry), signal.SIGKILL)
                killed.append(int(entry))
    return killed
