"""The samples that docs/guides/web-view.md includes, run as a reader would."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tests.faces.conftest import REPO, WAIT, app_env, log_in, open_url
from tests.faces.test_mcp_face import http_server

EXAMPLES = REPO / "examples" / "docs"


async def test_the_serve_ui_sample_prints_a_login_url_that_logs_in_once(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLES / "web_view_serve_ui.py"),
        str(tmp_path / "journal.db"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    assert process.stdin is not None
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), WAIT)).decode().strip()
        login_url = line.removeprefix("TOOLBRIDGE_UI_URL=")
        assert "?token=" in login_url
        base, cookie = await asyncio.to_thread(log_in, login_url)
        status, _, body = await asyncio.to_thread(open_url, f"{base}api/runs", headers={"cookie": cookie})
        assert status == 200
        assert [run["run_id"] for run in json.loads(body)["runs"]] == ["order-42"]
        assert (await asyncio.to_thread(open_url, login_url))[0] == 401  # spent
    finally:
        process.stdin.close()
        assert await asyncio.wait_for(process.wait(), WAIT) == 0


async def test_the_mcp_client_sample_calls_with_the_printed_token(faces_dir: Path) -> None:
    async with http_server(faces_dir, "127.0.0.1:0") as (url, token):
        env = {**app_env(faces_dir), "TOOLBRIDGE_MCP_URL": url, "TOOLBRIDGE_MCP_TOKEN": token}
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(EXAMPLES / "web_view_mcp_client.py"), env=env, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await asyncio.wait_for(process.communicate(), WAIT)
        assert process.returncode == 0
        assert out.decode().strip() == str(sorted(["lookup", "slow", "refuse", "miscount", "refund"]))
