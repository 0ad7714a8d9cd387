"""The Node client's batches on a real daemon: split at the size the daemon says it reads.

Beside tests/integration/test_stream_batches.py, which holds the Python client's case; the
Node client's own tests (clients/node/test/batches.test.js) count its messages on a fake.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import WAIT
from toolbridge import Bridge

MANY = """
const { tools } = require("inngest_tools");

async function main() {
  await tools.echo("first"); // the stream is open and the daemon has said its limit
  const values = await Promise.all(Array.from({ length: 60 }, (_, n) => tools.echo("x".repeat(1000) + n)));
  console.log(JSON.stringify(values.map((value) => value.slice(1000))));
}
main();
"""


async def test_the_node_client_splits_batches_at_the_daemons_limit(tmp_path: Path) -> None:
    # 60 calls of about 1 KiB in flight at once, on a daemon that reads at most 3 KiB per
    # message: a client that packed them all into one message would lose every call.
    (tmp_path / "many.js").write_text(MANY)
    async with (
        Bridge(journal=tmp_path / "journal.db", max_request_bytes=2048) as bridge,
        bridge.run("r") as step,
    ):
        result = await step.sandbox.commands.run(
            "many", ["node", "many.js"], tools={"echo": lambda value: value}, cwd=tmp_path, timeout=WAIT
        )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [str(n) for n in range(60)]
