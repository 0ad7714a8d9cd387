"""What each daemon of the history checker saw, read from its log (``toolbridge serve``'s stderr).

Counts, per daemon, of what its log says happened: starts, calls answered ``UNAVAILABLE``
because the journal could not write or read, calls answered ``INTERNAL`` (a daemon bug: the
checker's figures print them), lease renewals that failed and leases renewed again, leases
lost to a takeover, and reconnections to PostgreSQL (the ``LISTEN`` connection, the pool).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

__all__ = ["daemon_lines", "saw"]

_LINES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("starts", re.compile(r"^toolbridge: serving ")),
    ("calls answered UNAVAILABLE (journal)", re.compile(r"^\w+ failed \(err_\w+\): JournalError: ")),
    ("calls answered INTERNAL", re.compile(r"^\w+ failed \(err_\w+\)$")),
    ("commits failed", re.compile(r"^journal write failed: ")),
    ("lease renewals failed", re.compile(r"^could not renew the lease on run ")),
    ("leases renewed again", re.compile(r"^renewed the lease on run .* again$")),
    ("leases lost", re.compile(r"^lost the lease on run ")),
    ("LISTEN reconnection attempts failed", re.compile(r"^cannot LISTEN for events ")),
    ("pool refills failed", re.compile(r"^Failed to restore the pool connection floor")),
)


def saw(log: Path) -> Counter[str]:
    """What one daemon's log says happened, by kind (kinds that never happened are left out)."""
    found: Counter[str] = Counter()
    if not log.exists():
        return found
    for line in log.read_text(errors="replace").splitlines():
        for kind, pattern in _LINES:
            if pattern.search(line):
                found[kind] += 1
                break
    return found


def daemon_lines(daemons: dict[str, Counter[str]]) -> list[str]:
    """One line per daemon, for the figures."""
    return [
        f"daemon {name} saw: "
        + (", ".join(f"{kind} {seen[kind]}" for kind, _ in _LINES if seen[kind]) or "nothing")
        for name, seen in sorted(daemons.items())
    ]
