"""Shared fixtures: a real bridge on a real Unix socket, with a fresh SQLite file per test."""

from __future__ import annotations

import textwrap
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from toolbridge import Bridge


def _journal_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if "_connection_worker_thread" in t.name}


@pytest.fixture(autouse=True)
def no_leaked_journal() -> Iterator[None]:
    """Fail the test that leaves a journal open: its connection's thread blocks the exit."""
    before = _journal_threads()
    yield
    leaked = {t for t in _journal_threads() - before if t.is_alive()}
    for thread in leaked:
        thread.join(timeout=5)  # a close in flight finishes on its own
    assert not [t for t in leaked if t.is_alive()], "an aiosqlite connection was left open"


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
