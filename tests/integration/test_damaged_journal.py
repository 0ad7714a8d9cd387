"""A damaged journal is named and refused, never initialised afresh or met as a raw SQLite error.

Each file is first a real journal with completed steps (or a file that was never one); then
it is damaged as a bad copy or a failing disk would: emptied, truncated, its header
garbled, a page of its steps table overwritten. Opening it, replaying it, and ``toolbridge
doctor --journal`` must each say which file and what to do, and leave the file as it was.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from toolbridge import Bridge, JournalError

TOOLBRIDGE = str(Path(sys.executable).with_name("toolbridge"))
STEPS = 300


def add(a: int, b: int) -> int:
    return a + b


async def journal_with_steps(path: Path) -> None:
    async with Bridge(journal=path) as bridge, bridge.run("ledger") as step:
        for n in range(STEPS):
            await step.run(f"add-{n}", add, n, 1)


def doctor(path: Path) -> tuple[int, str]:
    done = subprocess.run(
        [TOOLBRIDGE, "doctor", "--journal", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    line = next(line for line in done.stdout.splitlines() if line[9:].startswith("journal:"))
    return done.returncode, line


async def replay(path: Path) -> list[int]:
    ran: list[int] = []

    def counted(a: int, b: int) -> int:
        ran.append(a)
        return a + b

    counted.__qualname__ = add.__qualname__  # the same function as recorded
    async with Bridge(journal=path) as bridge, bridge.run("ledger") as step:
        for n in range(STEPS):
            await step.run(f"add-{n}", counted, n, 1)
    return ran


async def test_an_empty_file_is_refused_not_taken_for_a_new_journal(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    path.write_bytes(b"")
    with pytest.raises(JournalError) as raised:
        await replay(path)
    message = str(raised.value)
    assert str(path) in message
    assert "empty (0 bytes)" in message
    assert "restore the journal from a backup" in message
    assert path.read_bytes() == b""  # left as it was
    status, line = doctor(path)
    assert status == 1
    assert line.startswith("missing ")
    assert "empty (0 bytes)" in line


async def test_a_truncated_journal_is_refused_and_nothing_runs_again(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    await journal_with_steps(path)
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])  # a copy cut short
    ran: list[int] = []
    with pytest.raises(JournalError) as raised:
        ran = await replay(path)
    assert ran == []
    assert str(path) in str(raised.value)
    assert not isinstance(raised.value.__cause__, JournalError)
    assert path.read_bytes() == whole[: len(whole) // 2]
    status, line = doctor(path)
    assert status == 1
    assert "missing" in line


async def test_a_garbled_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    await journal_with_steps(path)
    damaged = b"\x00garbled!" * 12 + path.read_bytes()[96:]
    path.write_bytes(damaged)
    with pytest.raises(JournalError, match="does not start as an SQLite file does") as raised:
        await replay(path)
    assert str(path) in str(raised.value)
    assert path.read_bytes() == damaged
    status, line = doctor(path)
    assert status == 1
    assert "is not a readable SQLite file (garbled header)" in line


async def test_garbled_pages_are_a_journal_error_naming_the_file_not_a_raw_sqlite_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.db"
    await journal_with_steps(path)
    with sqlite3.connect(path) as db:
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'steps'").fetchone()
    data = bytearray(path.read_bytes())
    start = (root - 1) * page_size
    data[start : start + page_size] = b"\xff" * page_size  # the steps table's root page
    path.write_bytes(bytes(data))
    with pytest.raises(JournalError) as raised:
        await replay(path)
    message = str(raised.value)
    assert str(path) in message
    assert "malformed" in message
    assert "toolbridge doctor --journal" in message or "restore the journal" in message
    assert isinstance(raised.value.__cause__, sqlite3.DatabaseError)
    status, line = doctor(path)
    assert status == 1
    assert "integrity check found" in line or "cannot read it" in line


async def test_another_programs_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO users (name) VALUES ('ada')")
    with pytest.raises(JournalError, match="not a toolbridge journal") as raised:
        await replay(path)
    assert "users" in str(raised.value)
    with sqlite3.connect(path) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert tables == ["users"]
    status, line = doctor(path)
    assert status == 1
    assert "another program's database" in line


def test_doctor_runs_the_integrity_check_on_a_whole_journal(tmp_path: Path) -> None:
    import asyncio

    from toolbridge._cli.doctor import _journal_file  # the check alone: the probes are slow

    path = tmp_path / "journal.db"
    asyncio.run(journal_with_steps(path))
    check = _journal_file(path)
    assert (check.status, check.detail) == ("ok", f"{path} (integrity check ok; 1 runs, {STEPS} steps)")
