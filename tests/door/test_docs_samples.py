"""The egress sample of docs/guides/shims-and-egress.md, against a local HTTPS server with a
test CA of its own (tests/docs/test_samples.py runs the shim sample, checking its .out)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.security.conftest import _REASON as BWRAP_MISSING

from .remote import Remote, WorldCA, remotes

SAMPLES = Path(__file__).resolve().parents[2] / "examples" / "docs"


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[tuple[WorldCA, Remote]]:
    ca = WorldCA(tmp_path)
    ca.path.chmod(0o644)
    async with remotes(ca, "ghp_the_real_token", 1) as (server,):
        yield ca, server


async def test_the_egress_sample(tmp_path: Path, api: tuple[WorldCA, Remote]) -> None:
    if BWRAP_MISSING is not None:
        pytest.skip(BWRAP_MISSING)
    ca, server = api
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SAMPLES / "shims_and_egress_egress.py"),
        f"localhost:{server.port}",
        str(ca.path),
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "GITHUB_TOKEN": "ghp_the_real_token"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    stdout, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()
    assert stdout.decode() == "the sandbox holds tbsecret_...\nthe API answered 200\n"
    (seen,) = server.seen
    assert seen.headers["authorization"] == "Bearer ghp_the_real_token"
