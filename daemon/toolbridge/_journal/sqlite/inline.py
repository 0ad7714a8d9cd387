"""Committing a lone write on the event loop itself, when that is cheap and cannot wait.

With ``synchronous=NORMAL`` a commit in WAL mode appends to the log and does not sync: tens
of microseconds, less than handing the batch to the writer's thread and being woken by it
(a lone call's commit is the largest cost on its path after the transport). It never waits:
its connection has no busy timeout, so while another process holds the write lock it gives
up at once and the writer (which waits) takes the batch. It never checkpoints either
(:mod:`.checkpoints` does, in a thread of its own). ``durability="full"`` syncs on every
commit, which would stall the loop: there every batch goes to the writer.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence

from toolbridge._journal.commit import Pending

__all__ = ["INLINE_BATCH", "InlineCommits"]

INLINE_BATCH = 1
"""The most writes a batch committed on the loop may hold; a larger one goes to the writer.

A lone write (a caller alone) is cheaper here than a hop to the writer's thread and back. A
batch (many callers) is better in the writer: sqlite runs there without the GIL, beside the
loop, on another core. Measured with 32 callers on one stream (async tool): 1,773 calls/s
with batches of up to 4 committed here, 2,071 with only lone writes, 2,092 with none."""

RunBatch = Callable[[sqlite3.Connection, Sequence[Pending]], None]


def busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite refused for a lock another connection holds (waiting could succeed).

    ``sqlite_errorcode`` is the extended code (``SQLITE_BUSY_SNAPSHOT`` is 517, say), whose
    low byte is the primary one.
    """
    return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


class InlineCommits:
    """A connection of the loop's own that commits small batches, or declines at once."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=0")
        self._db.execute("PRAGMA wal_autocheckpoint=0")

    def commit(self, run_batch: RunBatch, batch: Sequence[Pending]) -> bool:
        """Commit ``batch`` here with ``run_batch``, unless the writer should.

        Returns:
            Whether it was committed here.

        Raises:
            sqlite3.Error: the batch failed for another reason than a busy database (as it
                would have in the writer).
        """
        if len(batch) > INLINE_BATCH:
            return False
        try:
            run_batch(self._db, batch)
        except sqlite3.OperationalError as exc:
            if not busy(exc):  # a lone step is a deferred transaction: SQLITE_BUSY_SNAPSHOT too
                raise
            return False
        return True

    def close(self) -> None:
        self._db.close()
