"""The history checker's long schedule: minutes of faults across hosts, then the books compared.

Run as root (it builds network namespaces) with PostgreSQL installed::

    .venv/bin/python bench/partition_soak.py [--seed 30] [--faults 60] [--durability full]

Prints what the schedule did (faults by kind, calls, acknowledged results, executions per
daemon) and what the comparison found: results lost, completed steps run again, at-most-once
steps run twice. tests/hosts/history.py has the whole story; tests/hosts/test_history.py
runs a short schedule of it in ``make test``. The figures are counts, not timings.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.hosts.history import main  # the repository root is on the path from here

if __name__ == "__main__":
    main()
