"""Without the Node client on the host, Python commands work and Node ones fail saying why."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from toolbridge import Bridge, SandboxError

MISSING_MESSAGE = "inngest_tools is not available in this sandbox: TOOLBRIDGE_NODE_CLIENT="


@pytest.fixture
async def bridge_without_node_client(
    journal_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Bridge]:
    # A fixed path, so the stand-in the daemon caches for it is the same in every run.
    monkeypatch.setenv("TOOLBRIDGE_NODE_CLIENT", "/nonexistent/inngest-tools-node-client")
    async with Bridge(journal=journal_path) as opened:
        yield opened


async def test_python_works_and_node_fails_with_the_reason(
    bridge_without_node_client: Bridge, script: Callable[[str, str], Path], tmp_path: Path
) -> None:
    script("agent.py", "import asyncio\nfrom inngest_tools import tools\nprint(asyncio.run(tools.ping(1)))\n")
    script("agent.js", 'const { tools } = require("inngest_tools");\ntools.ping(1);\n')
    script("agent.mjs", 'import { tools } from "inngest_tools";\nawait tools.ping(1);\n')
    tools = {"ping": lambda n: n + 1}
    async with bridge_without_node_client.run("no-node-client") as step:
        python = await step.sandbox.commands.run("py", "python agent.py", tools=tools, cwd=tmp_path)
        required = await step.sandbox.commands.run("cjs", "node agent.js", tools=tools, cwd=tmp_path)
        imported = await step.sandbox.commands.run("esm", "node agent.mjs", tools=tools, cwd=tmp_path)
        with pytest.raises(SandboxError, match="cannot run TypeScript snippets: TOOLBRIDGE_NODE_CLIENT="):
            await step.sandbox.typescript("snippet", "return 1;")
    assert (python.exit_code, python.stdout) == (0, "2\n")
    for result in (required, imported):
        assert result.exit_code != 0
        assert MISSING_MESSAGE in result.stderr
        assert "is not the inngest_tools Node package" in result.stderr
