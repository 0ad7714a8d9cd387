"""Opening a journal to read: the one place the web view and ``toolbridge ui`` name a backend."""

from __future__ import annotations

from pathlib import Path

from toolbridge._errors import JournalError
from toolbridge._journal.base import Journal, open_journal

__all__ = ["Journal", "open_reader"]


def open_reader(location: str) -> Journal:
    """The journal at ``location`` (not yet opened), for reading.

    Raises:
        JournalError: for a file that is missing, or a location no journal can be opened at.
    """
    if "://" not in location and not Path(location).is_file():
        raise JournalError(f"no journal at {location} (pass --journal PATH)")
    try:
        return open_journal(location)
    except ValueError as exc:
        raise JournalError(str(exc)) from None
