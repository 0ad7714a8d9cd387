"""Shared fixtures: a real bridge on a real Unix socket, with a fresh SQLite file per test."""

from __future__ import annotations

import os
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from toolbridge import Bridge
from toolbridge._journal.sqlite import SQLiteJournal

_open_journals: dict[int, str] = {}
"""Journals opened and not yet closed, by id, with the test that opened them."""


@pytest.fixture(autouse=True)
def no_leaked_journal(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test that leaves a journal open: its connection's thread would block the exit."""
    open_journal, close_journal = SQLiteJournal.open, SQLiteJournal.close

    async def tracked_open(self: SQLiteJournal) -> None:
        await open_journal(self)
        _open_journals[id(self)] = request.node.nodeid

    async def tracked_close(self: SQLiteJournal) -> None:
        await close_journal(self)
        _open_journals.pop(id(self), None)

    # Patched by hand, not with the test's `monkeypatch`, which a test may undo midway.
    SQLiteJournal.open, SQLiteJournal.close = tracked_open, tracked_close  # type: ignore[method-assign]
    try:
        yield
    finally:
        SQLiteJournal.open, SQLiteJournal.close = open_journal, close_journal  # type: ignore[method-assign]
    leaked = [opener for opener in _open_journals.values() if opener == request.node.nodeid]
    assert not leaked, f"{len(leaked)} journal(s) left open"


def pytest_unconfigure(config: pytest.Config) -> None:
    # The journal makes aiosqlite's connection threads daemons, so one left open no longer
    # hangs the run at exit; it is still a leak (and a lease held): say who opened it.
    alive = [t for t in threading.enumerate() if "_connection_worker_thread" in t.name and t.is_alive()]
    if alive:
        print(f"\n{len(alive)} aiosqlite connection(s) left open, by: {sorted(set(_open_journals.values()))}")
        sys.stdout.flush()
        os._exit(3)


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    return tmp_path / "journal.db"


@pytest.fixture
async def bridge(journal_path: Path) -> AsyncIterator[Bridge]:
    async with Bridge(journal=journal_path) as opened:
        yield opened


@pytest.fixture
def script(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write a sandbox script into the test's directory: ``script("agent.py", code)``."""

    def write(name: str, code: str) -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(code).lstrip())
        return path

    return write
