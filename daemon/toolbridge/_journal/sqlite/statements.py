"""What SQLite spells its own way: the host's clock, ``IS``, and the fenced multi-row step upsert."""

from __future__ import annotations

import functools

from toolbridge._journal import rows as r
from toolbridge._journal.statements import STEP_CHANGES, Dialect

__all__ = ["ROWS_PER_STATEMENT", "SQLITE", "UPSERT_STEP", "fences", "upsert_steps"]

SQLITE = Dialect("sqlite", numbered=False, clock=None, same="IS")
"""One file has one host: its leases run on that host's clock, passed as a parameter."""

ROWS_PER_STATEMENT = 500  # 17 values x 500 rows stays far below SQLite's 32766 parameters

# Fenced in the statement itself: a row is written only while its run's fence is the one this
# journal took (the 17th value); RETURNING names the rows written, so the others are refused.
_VALUES = ", ".join(f"column{i}" for i in range(1, 17))
_UPSERT_HEAD = f"INSERT INTO steps ({r.STEP_COLUMNS}) SELECT {_VALUES} FROM (VALUES"
_UPSERT_ROW = f"({', '.join('?' * 17)})"
_UPSERT_TAIL = f""") AS v
    WHERE EXISTS (SELECT 1 FROM runs WHERE runs.run_id = v.column1 AND runs.fence = v.column17)
    {STEP_CHANGES}
    RETURNING run_id, step_key"""

# One step alone, fenced the same way (the 17th and 18th values: its run and the fence taken),
# and no rows to name: the count of rows changed (0 or 1) says whether it was written.
UPSERT_STEP = f"""INSERT INTO steps ({r.STEP_COLUMNS}) SELECT {", ".join("?" * 16)}
    WHERE (SELECT fence FROM runs WHERE run_id = ?) = ?
    {STEP_CHANGES}"""


@functools.lru_cache(maxsize=64)
def upsert_steps(rows: int) -> str:
    """The fenced upsert of ``rows`` steps (built once per size: a lone step is the usual)."""
    return f"{_UPSERT_HEAD} {', '.join([_UPSERT_ROW] * rows)} {_UPSERT_TAIL}"


@functools.lru_cache(maxsize=64)
def fences(runs: int) -> str:
    """The owner and fence of ``runs`` runs (the batch's ``BEGIN IMMEDIATE`` holds off takeovers)."""
    return f"SELECT run_id, owner, fence FROM runs WHERE run_id IN ({', '.join('?' * runs)})"
