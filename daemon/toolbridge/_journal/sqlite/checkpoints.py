"""The journal's log copied into the database file beside the commits, never in their way.

In WAL mode a commit appends pages to the log, and a checkpoint copies them into the database
file, syncing the log before and the file after (milliseconds on a real disk). A log can
start over only once a checkpoint has copied it to its end. Left to itself, SQLite runs the
checkpoint inside whichever commit takes the log past 1,000 pages, and that commit, with
every call waiting for it, takes the checkpoint's time; so did the commits held back while
the writer's thread checkpointed for the loop's connection. Beside a command flooding the
daemon, that was most of a quiet command's p99 (``bench/concurrency.py``: 5.4 to 8.5 ms
beside 0.9 ms alone; 2.0 ms with no checkpoints at all, and on tmpfs, where a sync is free).

So no connection of the journal checkpoints by itself (``wal_autocheckpoint=0``), and every
:data:`CHECKPOINT_EVERY` commits a connection in a thread of its own runs passive
checkpoints, which never hold a writer off, until one finds nothing new appended since the
one before: the log has been copied to its end, and the next write transaction to begin
starts it over. Whenever the log is still longer than :data:`LOG_LIMIT` after that (commits
kept outrunning :data:`PASSES` passes, or a transaction that began before the end was copied
went on appending), one ``RESTART`` checkpoint copies the last pages while writers wait (a
commit on the loop, which never waits, hands its batch to the writer's thread meanwhile) and
starts it over itself: the log stays bounded under any load, and writers are held off only
under steady writes, once in several checkpoints.
"""

from __future__ import annotations

import logging
import os
import sqlite3

from toolbridge._journal.sqlite.writer import Writer

__all__ = ["CHECKPOINT_EVERY", "LOG_LIMIT", "PASSES", "RESTART_WAIT_MS", "Checkpoints"]

log = logging.getLogger("toolbridge")

CHECKPOINT_EVERY = 256
"""Commits between two checkpoints (each commit appends a few pages to the log)."""

PASSES = 8
"""Passive checkpoints tried, each copying what was appended during the one before, before
one that holds writers off while it copies the rest."""

LOG_LIMIT = 4096
"""Pages (16 MiB at SQLite's 4 KiB) past which a log the passive passes could not bring to
its end is copied to its end while writers wait. Below it, it waits for the next checkpoint:
under steady writes, that holds them off once in a few checkpoints instead of at each."""

RESTART_WAIT_MS = 20
"""How long the checkpoint that holds writers off waits, for the write lock and then (holding
it) for a reader of old pages, such as another process paging through a trace; past it, it
gives up and a later one tries again (the log grows meanwhile, nothing else)."""


class Checkpoints:
    """Checkpoints of one journal file, in a thread and on a connection of their own.

    Args:
        path: The database file.
        synchronous: ``NORMAL`` or ``FULL``, as the journal's other connections.
    """

    def __init__(self, path: str | os.PathLike[str], *, synchronous: str) -> None:
        self._thread = Writer(path, synchronous=synchronous, name="toolbridge-journal-checkpoints")
        self._commits = 0
        self._running = False
        self.done = 0
        """Checkpoints finished (with the log copied to its end or not): for tests."""

    async def start(self) -> None:
        await self._thread.start()

    async def stop(self) -> None:
        """Stop once a checkpoint running now is done (the next commit need not wait for it)."""
        await self._thread.stop()

    def committed(self) -> None:
        """Count a commit; every :data:`CHECKPOINT_EVERY`, start a checkpoint unless one runs.

        In the loop, and cheap: the checkpoint runs in its own thread, and the commit that
        started it does not wait for it.
        """
        self._commits += 1
        if self._commits < CHECKPOINT_EVERY or self._running:
            return
        self._commits = 0
        self._running = True  # before the thread may start (and finish) it
        try:
            self._thread.submit(self._checkpoint, _nothing)
        except sqlite3.ProgrammingError:  # stopped: the journal is closing
            self._running = False

    def _checkpoint(self, db: sqlite3.Connection | None) -> None:
        """In the checkpoints' thread, which says itself when it is done: the loop may be
        busy committing for a while before it turns."""
        assert db is not None
        try:
            _checkpoint(db)
        except sqlite3.Error as exc:  # the next one tries again; nothing is lost meanwhile
            log.warning("could not checkpoint the journal's log: %s", exc)
        finally:
            self.done += 1
            self._running = False


def _nothing(error: BaseException | None) -> None:
    return None


def _checkpoint(db: sqlite3.Connection) -> None:
    """Copy the log to its end: passive passes while commits go on, then one that holds them."""
    # A RESTART holds writers off while it waits for readers of old pages: not for long.
    db.execute(f"PRAGMA busy_timeout={RESTART_WAIT_MS}")
    # Each statement is read to its end (``fetchall``): one left open holds a read of the log,
    # and no commit can start a log over that a reader may still be reading.
    # A pass copies the log as it was when it began (``frames`` counts it then), so the log has
    # been copied to its end when the next pass finds it no longer than that.
    before = frames = -1
    for _ in range(PASSES):
        ((busy, frames, copied),) = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        if not busy and copied == frames == before:
            break
        before = copied
    # Copied to its end is not always started over: only a write transaction that begins
    # after that does it, and one already open (the writer's, syncing under "full") does not.
    # A log that has grown past the limit all the same is started over here.
    if frames > LOG_LIMIT:
        db.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()
