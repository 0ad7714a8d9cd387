"""Calls from real `node` scripts to a real daemon: arguments, results, errors, definitions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tests.e2e.node_launchers import LAUNCHERS
from toolbridge import Bridge, ToolError, ToolOptions, tool, tool_definitions
from toolbridge._journal.sqlite import SQLiteJournal


class CustomerId(BaseModel):
    id: str


class Customer(BaseModel):
    name: str
    seats: int


CUSTOMERS = {"cus_1": {"name": "Acme", "seats": 12}}

# Each line of output: [label, result] or [label, {error: {...}}].
REPORT = """
const { tools, ToolError } = require("inngest_tools");

async function report(label, call) {
  try {
    console.log(JSON.stringify([label, await call()]));
  } catch (error) {
    if (!(error instanceof ToolError)) throw error;
    const { type, message, retryable, errorId } = error;
    const isError = error instanceof Error;
    console.log(JSON.stringify([label, { error: { type, message, retryable, errorId, isError } }]));
  }
}
"""


def _lines(stdout: str) -> dict[str, Any]:
    return dict(json.loads(line) for line in stdout.splitlines())


@pytest.fixture(params=LAUNCHERS)
async def bridge(journal_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Bridge]:
    """Each test under both launchers; its folder readable by bubblewrap's sandbox user."""
    journal_path.parent.chmod(0o755)  # pytest's tmp_path is 0700; scripts are written 0644
    async with Bridge(journal=journal_path, sandbox=request.param) as opened:
        yield opened


async def test_calls_results_and_tool_errors(
    bridge: Bridge, script: Callable[[str, str], Path], tmp_path: Path, journal_path: Path
) -> None:
    script(
        "agent.js",
        REPORT
        + """
        async function main() {
          await report("positional", () => tools.add(2, 3));
          await report("named", () => tools.getCustomer({ id: "cus_1" }));
          await report("wrong type", () => tools.getCustomer({ id: 7 }));
          await report("missing field", () => tools.getCustomer({}));
          await report("two positional to a step tool", () => tools.getCustomer("cus_1", "cus_2"));
          await report("wrong arity", () => tools.add(1));
          await report("tool refuses", () => tools.refund({ orderId: "o_1" }));
          await report("tool crashes", () => tools.explode());
          await report("unknown tool", () => tools.nope());
          await report("unicode", () => tools.echo("café ✓ 😀", [1, 2.5, null], { nested: { ok: true } }));
        }
        main();
        """,
    )
    ran: list[str] = []

    def get_customer_run(args: CustomerId) -> dict[str, Any]:
        ran.append(args.id)
        return CUSTOMERS[args.id]

    def refund_run(args: dict[str, Any]) -> None:
        raise ToolError(f"order {args['orderId']} was already refunded", type="AlreadyRefunded")

    def explode() -> None:
        raise RuntimeError("database password is hunter2")

    tools = {
        "add": lambda a, b: a + b,
        "getCustomer": tool.step(input=CustomerId, output=Customer, run=get_customer_run),
        "refund": tool.step(run=refund_run),
        "explode": explode,
        "echo": lambda text, numbers, nested: [text, numbers, nested],
    }
    async with bridge.run("calls") as step:
        result = await step.sandbox.commands.run(
            "agent", "node agent.js", tools=tools, tool_options=ToolOptions(attempts=1), cwd=tmp_path
        )
    assert result.exit_code == 0, result.stderr
    out = _lines(result.stdout)
    assert out["positional"] == 5
    assert out["named"] == {"name": "Acme", "seats": 12}
    assert out["unicode"] == ["café ✓ 😀", [1, 2.5, None], {"nested": {"ok": True}}]
    # Bad arguments: a ValidationError, and the tool never ran.
    assert ran == ["cus_1"]
    for label in ("wrong type", "missing field", "two positional to a step tool", "wrong arity"):
        error = out[label]["error"]
        assert error["type"] == "ValidationError", label
        assert error["isError"] is True
        assert error["retryable"] is False
    assert "/id" in out["wrong type"]["error"]["message"]
    assert out["tool refuses"]["error"] == {
        "type": "AlreadyRefunded",
        "message": "order o_1 was already refunded",
        "retryable": False,
        "errorId": "",
        "isError": True,
    }
    # An unexpected exception: a generic message with an error id; the detail stays in the journal.
    crash = out["tool crashes"]["error"]
    assert crash["type"] == "InternalError"
    assert crash["errorId"].startswith("err_")
    assert crash["errorId"] in crash["message"]
    assert "hunter2" not in result.stdout + result.stderr
    journal = SQLiteJournal(journal_path)
    await journal.open()
    try:
        steps = await journal.load_steps("calls")
    finally:
        await journal.close()
    [crashed] = [s for s in steps if s.name == "explode"]
    assert "hunter2" in json.dumps(crashed.attempt_log)
    assert crash["errorId"] in json.dumps(crashed.attempt_log)
    assert out["unknown tool"]["error"]["type"] == "ToolNotFound"


async def test_concurrent_calls_each_get_their_own_answer(
    bridge: Bridge, script: Callable[[str, str], Path], tmp_path: Path
) -> None:
    script(
        "agent.js",
        """
        const { tools } = require("inngest_tools");
        async function main() {
          const ids = Array.from({ length: 40 }, (_, i) => i);
          const results = await Promise.all(ids.map((i) => tools.square(i)));
          console.log(JSON.stringify(results));
        }
        main();
        """,
    )
    async with bridge.run("concurrent") as step:
        result = await step.sandbox.commands.run(
            "agent", "node agent.js", tools={"square": lambda n: n * n}, cwd=tmp_path
        )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [i * i for i in range(40)]


async def test_large_arguments_and_answers_cross_whole_beside_small_calls(
    bridge: Bridge, script: Callable[[str, str], Path], tmp_path: Path
) -> None:
    # Past the HTTP/2 window grpc starts with (64 KiB) and the client's (4 MiB): the client's
    # own HTTP/2 must wait for grpc's WINDOW_UPDATEs as it sends, and send its own as it
    # reads, while small calls share the stream.
    script(
        "agent.js",
        """
        const { tools } = require("inngest_tools");
        async function main() {
          const big = "a".repeat(200 * 1024);
          const [sent, answered, ...small] = await Promise.all([
            tools.size(big),
            tools.repeat(5 * 1024 * 1024),
            ...Array.from({ length: 20 }, (_, i) => tools.size("b".repeat(i * 2000))),
          ]);
          const allB = /^b*$/.test(answered);
          console.log(JSON.stringify({ sent, answered: answered.length, allB, small }));
        }
        main();
        """,
    )
    async with bridge.run("large") as step:
        result = await step.sandbox.commands.run(
            "agent",
            "node agent.js",
            tools={"size": len, "repeat": lambda n: "b" * n},
            tool_options=ToolOptions(max_reply_bytes=8 * 1024 * 1024),
            cwd=tmp_path,
        )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "sent": 200 * 1024,
        "answered": 5 * 1024 * 1024,
        "allB": True,
        "small": [i * 2000 for i in range(20)],
    }


async def test_definitions_are_the_hosts_in_every_format(
    bridge: Bridge, script: Callable[[str, str], Path], tmp_path: Path
) -> None:
    script(
        "agent.js",
        """
        const { definitions } = require("inngest_tools");
        async function main() {
          const listed = {};
          for (const format of ["anthropic", "openai", "openai-strict", "mcp"]) {
            listed[format] = await definitions({ format });
          }
          listed.default = await definitions();
          console.log(JSON.stringify(listed));
        }
        main();
        """,
    )

    def list_invoices(customer_id: str, limit: int = 10) -> list[str]:
        """List a customer's invoices.

        Args:
            customer_id: The customer.
            limit: At most this many.
        """
        return []

    tools = {
        "getCustomer": tool.step(
            description="Look up a customer by ID", input=CustomerId, output=Customer, run=print
        ),
        "listInvoices": list_invoices,
    }
    async with bridge.run("definitions") as step:
        result = await step.sandbox.commands.run("agent", "node agent.js", tools=tools, cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    listed = json.loads(result.stdout)
    for format in ("anthropic", "openai", "openai-strict", "mcp"):
        assert listed[format] == tool_definitions(tools, format=format), format
    assert listed["default"] == listed["anthropic"]
    assert [d["name"] for d in listed["anthropic"]] == ["getCustomer", "listInvoices"]


async def test_an_es_module_imports_the_client_from_any_folder(
    bridge: Bridge, script: Callable[[str, str], Path], tmp_path: Path
) -> None:
    script(
        "agent.mjs",
        """
        import { tools, ToolError } from "inngest_tools";
        import v8 from "node:v8";

        const customer = await tools.getCustomer("cus_1");
        const missing = await tools.getCustomer("cus_404").catch((error) => error);
        const heapMiB = v8.getHeapStatistics().heap_size_limit / 2 ** 20;
        console.log(JSON.stringify([customer, missing instanceof ToolError, missing.type, heapMiB < 200]));
        """,
    )

    def get_customer(customer_id: str) -> dict[str, Any]:
        if customer_id not in CUSTOMERS:
            raise ToolError(f"no customer {customer_id}", type="NotFound")
        return CUSTOMERS[customer_id]

    async with bridge.run("esm") as step:
        result = await step.sandbox.commands.run(
            "agent",
            "node agent.mjs",
            tools={"getCustomer": get_customer},
            cwd=tmp_path,
            # The caller's Node options are kept, after the daemon's module hook.
            env={"NODE_OPTIONS": "--max-old-space-size=64"},
        )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [CUSTOMERS["cus_1"], True, "NotFound", True]
