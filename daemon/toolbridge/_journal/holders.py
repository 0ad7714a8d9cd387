"""Who holds a run, told well enough to know when that process is gone.

A run's lease names its holder. A holder killed with SIGKILL cannot release its lease, and
waiting out the lease made every restart on the same machine wait up to ``run_lease`` (30 s)
for its own dead predecessor. So the owner id carries, beside the host name and pid, this
machine's boot id, the pid namespace and the process's start time: a holder on this machine
(same boot, same pid namespace) whose pid no longer exists, or now belongs to a process
started at another time (the pid was reused), is known dead, and its run is taken over at
once. Any other holder (live, on another host, in another container, or an owner id from an
older toolbridge) keeps its run until its lease ends.
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import socket

__all__ = ["holder_gone", "new_owner"]


def new_owner() -> str:
    """An owner id for one journal instance: ``host:pid:random:machine:start``."""
    machine, start = _machine(), _start_time(os.getpid())
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}:{machine}:{start}"


def holder_gone(owner: str | None) -> bool:
    """Whether ``owner`` was a process on this machine that no longer runs."""
    if not owner:
        return False
    parts = owner.split(":")
    if len(parts) != 5 or not parts[1].isdigit():
        return False  # an owner id from an older toolbridge, or another's: wait for its lease
    host, pid, _, machine, start = parts
    if host != socket.gethostname() or machine != _machine() or machine.endswith("-?"):
        return False
    return _start_time(int(pid)) != start


@functools.cache
def _machine() -> str:
    """This boot of this machine, and this pid namespace: where a pid means one process."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as file:
            boot = file.read().strip().replace("-", "")[:16]
        found = re.search(r"\d+", os.readlink("/proc/self/ns/pid"))
        return f"{boot}-{found.group() if found else '?'}"
    except OSError:
        return "?-?"  # no /proc: never judge a holder dead


def _start_time(pid: int) -> str:
    """When process ``pid`` started (clock ticks since boot); empty when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            stat = file.read()
    except OSError:
        return ""
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):  # killed, not yet reaped by its parent: gone all the same
        return ""
    return fields[19]  # field 22 of stat; the two before the fields split here are pid and comm
