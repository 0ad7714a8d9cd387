"""Shared fixtures: a real bridge on a real Unix socket, with a fresh SQLite file per test."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from toolbridge import Bridge


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
