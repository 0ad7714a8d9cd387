"""Opening a journal to read: the one place the web view and ``toolbridge ui`` name a backend.

When the journal grows an ``open_journal(location)`` factory (SQLite files, PostgreSQL URLs),
this module is the one line to change.
"""

from __future__ import annotations

from pathlib import Path

from toolbridge._errors import JournalError
from toolbridge._journal.sqlite import Journal, SQLiteJournal

__all__ = ["Journal", "open_reader"]


def open_reader(location: str) -> Journal:
    """The journal at ``location`` (not yet opened), for reading.

    Raises:
        JournalError: for a location this toolbridge cannot read, or a file that is missing.
    """
    if "://" in location:
        raise JournalError(
            f"cannot read {location.split('://', 1)[0]}:// journals with this toolbridge: give the "
            "SQLite journal's file path"
        )
    path = Path(location)
    if not path.is_file():
        raise JournalError(f"no journal at {location} (pass --journal PATH)")
    return SQLiteJournal(path)
