"""The journal's file: created private and whole, and refused when it is not a journal.

A journal holds every argument and result of every run, so it is created ``0600`` (SQLite
gives its ``-wal`` and ``-shm`` the mode of the database file), and a looser one found on
open is tightened.

Only a path that does not exist is created, and it is created whole: the schema is written
to a private temporary file beside it, which is then linked into place, so no process ever
sees a half-made journal. Anything already at the path must be a toolbridge journal: an
empty file, a file that is not SQLite (a garbled header) or an SQLite database of another
program is refused with a :class:`JournalError` naming the file and what to do, never
initialised afresh (a journal truncated by a bad copy would otherwise run every completed
step again).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import stat
from pathlib import Path

import aiosqlite

from toolbridge._errors import JournalError
from toolbridge._journal.sqlite.migrations import LEGACY_VERSIONS, migrate

__all__ = ["DAMAGED_HINT", "SQLITE_HEADER", "check_schema", "prepare_file", "sqlite_error"]

SQLITE_HEADER = b"SQLite format 3\x00"
SIDE_FILES = ("-wal", "-shm", "-journal")
DAMAGED_HINT = (
    "restore the journal from a backup (with its -wal file), or move it aside to start a new "
    "journal there (its runs are then forgotten); `toolbridge doctor --journal PATH` checks a file"
)


def sqlite_error(path: Path, exc: sqlite3.Error, doing: str) -> JournalError:
    """An SQLite error as a :class:`JournalError` naming the file and what to do."""
    text = str(exc)
    if isinstance(exc, sqlite3.DatabaseError) and ("malformed" in text or "not a database" in text):
        hint = DAMAGED_HINT
    elif "locked" in text or "busy" in text:
        hint = "another process holds the journal busy; try again, or stop the other process"
    elif "readonly" in text or "unable to open" in text or "disk" in text:
        hint = "check the journal's folder: it must exist, be writable and have space"
    else:
        hint = f"check the file with `toolbridge doctor --journal {path}`"
    return JournalError(f"journal {path}: {doing} failed: {text}: {hint}")


async def prepare_file(path: Path) -> None:
    """Create a journal at ``path`` when nothing is there; otherwise check it is one.

    Raises:
        JournalError: when the path holds an empty or non-SQLite file, or cannot be created.
    """
    if not _check_existing(path):
        await _create(path)


def _check_existing(path: Path) -> bool:
    """Whether a journal is at ``path`` (checked and tightened); False when nothing is."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode):
        raise JournalError(f"journal {path} is not a file: give the bridge the path of a journal file")
    if info.st_size == 0:
        raise JournalError(f"journal {path} is empty (0 bytes), not a toolbridge journal: {DAMAGED_HINT}")
    with path.open("rb") as file:
        header = file.read(len(SQLITE_HEADER))
    if header != SQLITE_HEADER:
        raise JournalError(
            f"journal {path} is not a toolbridge journal (it does not start as an SQLite file does; "
            f"garbled, or another kind of file): {DAMAGED_HINT}"
        )
    _tighten(path)
    return True


async def check_schema(db: aiosqlite.Connection, path: Path) -> None:
    """Refuse an SQLite database that is not a toolbridge journal (of any version).

    Raises:
        JournalError: naming the file, when its tables are another program's.
    """
    tables = {
        row[0] for row in await db.execute_fetchall("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    if "schema_migrations" in tables or {"runs", "steps"} <= tables:
        return
    version = next(iter(await db.execute_fetchall("PRAGMA user_version")))[0]
    if version > LEGACY_VERSIONS:
        return  # counted by a toolbridge newer than this one: the migration refuses it, saying so
    shown = ", ".join(sorted(tables)[:5]) or "none"
    raise JournalError(
        f"journal {path} is an SQLite database but not a toolbridge journal (its tables: {shown}): "
        "give the bridge another path; toolbridge never writes its tables into another database"
    )


def _tighten(path: Path) -> None:
    """A journal (and its side files) readable by group or others becomes ``0600``."""
    for file in (path, *(Path(f"{path}{suffix}") for suffix in SIDE_FILES)):
        with contextlib.suppress(FileNotFoundError, PermissionError):
            mode = file.stat().st_mode
            if mode & 0o077:
                file.chmod(stat.S_IMODE(mode) & 0o700)


async def _create(path: Path) -> None:
    temporary = path.with_name(f".{path.name}.new-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    except OSError as exc:
        raise JournalError(
            f"cannot create journal {path}: {exc.strerror}: its folder must exist and be writable"
        ) from exc
    try:
        try:
            async with aiosqlite.connect(temporary, isolation_level=None) as db:
                await db.execute("PRAGMA journal_mode=WAL")
                await migrate(db, path)
        except sqlite3.Error as exc:
            raise sqlite_error(path, exc, "creating") from exc
        # Closed: its -wal is folded in and removed. Linking never replaces a journal that
        # another process created meanwhile (that one is used instead).
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        for suffix in ("", *SIDE_FILES):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{temporary}{suffix}")
