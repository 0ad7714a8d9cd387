"""A host program as a user writes one, run by the interpreter of a fresh venv (no checkout).

``python host.py --sandbox process|bwrap --work DIR``: runs a Python command, a Node command
(``require`` and ``import``), a Python snippet and a TypeScript snippet, each calling a tool,
and prints one JSON object: what each printed or returned, and where every module came from.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any, Literal

import inngest_tools
import toolbridge
from toolbridge import Bridge
from toolbridge._sandbox.runtime.node import find_node_client

PYTHON_AGENT = """\
import asyncio, inngest_tools
from inngest_tools import tools
print(asyncio.run(tools.ping(1)), inngest_tools.__file__)
"""
REQUIRE_AGENT = """\
const { tools } = require("inngest_tools");
tools.ping(1).then((n) => console.log(n, require.resolve("inngest_tools")));
"""
IMPORT_AGENT = """\
import { tools } from "inngest_tools";
console.log(await tools.ping(1), import.meta.resolve("inngest_tools"));
"""


def ping(n: int) -> int:
    return n + 1


async def main(sandbox: Literal["process", "bwrap"], work: Path, journal: Path) -> dict[str, Any]:
    (work / "agent.py").write_text(PYTHON_AGENT)
    (work / "agent.js").write_text(REQUIRE_AGENT)
    (work / "agent.mjs").write_text(IMPORT_AGENT)
    tools = {"ping": ping}
    report: dict[str, Any] = {
        "sys_path": sys.path,
        "toolbridge": toolbridge.__file__,
        "inngest_tools": inngest_tools.__file__,
        "node_client": str(find_node_client().directory),
    }
    async with Bridge(journal=journal, sandbox=sandbox) as bridge, bridge.run(f"install-{sandbox}") as step:
        for name, command in (
            ("python", "python agent.py"),
            ("require", "node agent.js"),
            ("import", "node agent.mjs"),
        ):
            result = await step.sandbox.commands.run(name, command, tools=tools, cwd=work, timeout=120)
            report[name] = {"exit_code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr}
        report["python_snippet"] = await step.sandbox.python(
            "py-snippet", "return await tools.ping(1)", tools=tools, output=int, timeout=120
        )
        report["typescript_snippet"] = await step.sandbox.typescript(
            "ts-snippet",
            "const n: number = await tools.ping(1);\nreturn n;",
            tools=tools,
            output=int,
            timeout=120,
        )
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--sandbox", required=True, choices=["process", "bwrap"])
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--journal", required=True, type=Path)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.sandbox, args.work, args.journal))))
