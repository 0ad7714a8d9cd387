# docs-sample: run by tests/door/test_docs_samples.py::test_the_egress_sample
"""A sandboxed script calls an HTTPS API with a token it never holds.

Usage: python shims_and_egress_egress.py [API_HOST [UPSTREAM_CA]]
(the API host defaults to api.github.com; the tests give a local server and its test CA).
"""

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from toolbridge import Bridge, BwrapLauncher, Egress, EgressRule, Secret

API = sys.argv[1] if len(sys.argv) > 1 else "api.github.com"
UPSTREAM_CA = sys.argv[2] if len(sys.argv) > 2 else None  # None: the system's trust

egress = Egress(
    allow=[
        API,
        # A payment leaves only once a person approves it (CLI, web view, MCP or host code).
        EgressRule("payments.example.com", methods=["GET", "POST"], requires_confirmation=["POST"]),
    ],
    secrets=[Secret("GITHUB_TOKEN", os.environ.get("GITHUB_TOKEN", "ghp_example"), hosts=[API])],
    max_requests=20,
    upstream_ca=UPSTREAM_CA,
)

AGENT = f"""
import json, os, urllib.request
print("the sandbox holds", os.environ["GITHUB_TOKEN"][:9] + "...")
request = urllib.request.Request("https://{API}/user",
                                 headers={{"Authorization": "Bearer " + os.environ["GITHUB_TOKEN"]}})
with urllib.request.urlopen(request) as answer:
    print("the API answered", answer.status)
"""


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o755)  # the sandbox's user reads it
        work = Path(folder)
        async with (
            Bridge(journal=work / "journal.db", sandbox=BwrapLauncher()) as bridge,
            bridge.run("egress") as step,
        ):
            result = await step.sandbox.commands.run(
                "agent", ["python3", "-c", AGENT], cwd=work, egress=egress
            )
    print(result.stdout, end="")


asyncio.run(main())
