"""Fixtures for the faces: the test app's folder, and `toolbridge` run as a user runs it."""

from __future__ import annotations

import asyncio
import os
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOLBRIDGE = str(Path(sys.executable).with_name("toolbridge"))
WAIT = 60.0
"""Seconds a test waits for a process or a page before it fails."""


@pytest.fixture
def faces_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder of the test app (``tests.faces.app``): its journal, call log and gate FIFO."""
    directory = tmp_path / "app"
    directory.mkdir()
    os.mkfifo(directory / "gate")
    monkeypatch.setenv("FACES_DIR", str(directory))
    return directory


def app_env(faces_dir: Path) -> dict[str, str]:
    return {**os.environ, "FACES_DIR": str(faces_dir)}


def calls(faces_dir: Path) -> list[str]:
    log = faces_dir / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


async def open_gate(faces_dir: Path) -> None:
    """Let a ``slow`` call go on: open its FIFO for writing (waits until the tool reads it)."""

    def write() -> None:
        with open(faces_dir / "gate", "w") as gate:
            gate.write("go")

    await asyncio.wait_for(asyncio.to_thread(write), WAIT)


async def stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.terminate()
    await asyncio.wait_for(process.wait(), WAIT)


async def serving(
    *args: str, env: dict[str, str], prefix: str
) -> AsyncIterator[tuple[str, asyncio.subprocess.Process]]:
    """Start ``toolbridge ARGS`` and yield the value of the ``PREFIX=...`` line it prints."""
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE, *args, cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), WAIT)).decode().strip()
        if not line.startswith(f"{prefix}="):
            assert process.stderr is not None
            raise AssertionError(f"{line!r}; stderr: {(await process.stderr.read()).decode()}")
        yield line.removeprefix(f"{prefix}="), process
    finally:
        await stop(process)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def open_url(
    url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One request, redirects not followed: its status, headers and body."""
    request = urllib.request.Request(url, data=data, headers=headers or {}, method="POST" if data else "GET")
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=WAIT) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def log_in(login_url: str) -> tuple[str, str]:
    """Spend the web view's login URL as a browser would: its base URL and the session cookie
    (``name=value``, for a ``Cookie`` header)."""
    status, headers, _ = open_url(login_url)
    assert status == 303, status
    cookie = headers["set-cookie"].split(";")[0]
    return login_url.split("?")[0], cookie
