"""Both in-sandbox clients and both runners work inside bubblewrap, not only beside it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from toolbridge import Bridge, ToolError

SEED_AGENT_JS = """
const { tools } = require("inngest_tools");

async function main() {
  const customer = await tools.getCustomer("cus_1");
  console.log(customer.name);
}

main();
"""

ESM_AGENT = """
import { tools, ToolError } from "inngest_tools";

console.log(await tools.getCustomer("cus_1").then((c) => c.seats));
try {
  await tools.getCustomer("nobody");
} catch (error) {
  console.log(error instanceof ToolError, error.type);
}
"""

CUSTOMERS = {"cus_1": {"name": "Acme", "seats": 12}}


def get_customer(customer_id: str) -> dict[str, object]:
    if customer_id not in CUSTOMERS:
        raise ToolError(f"no customer {customer_id}", type="NotFound")
    return CUSTOMERS[customer_id]


async def test_the_seed_node_agent_calls_tools_from_inside_bubblewrap(
    sandboxed: Bridge, work_dir: Path, write_script: Callable[[str, str], Path]
) -> None:
    write_script("agent.js", SEED_AGENT_JS)
    async with sandboxed.run() as step:
        result = await step.sandbox.commands.run(
            "agent", "node agent.js", tools={"getCustomer": get_customer}, cwd=work_dir
        )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Acme\n"


async def test_a_node_command_compiles_the_client_from_the_runtime_s_code_cache(
    sandboxed: Bridge, work_dir: Path, write_script: Callable[[str, str], Path]
) -> None:
    # The cache was written outside the sandbox, when the runtime was built; inside, the same
    # node must accept it for every module the first call loads.
    write_script(
        "agent.js",
        """
        const { tools } = require("inngest_tools");
        const loader = require(require.resolve("inngest_tools").replace(/index\\.js$/, "lib/loader.js"));
        tools.getCustomer("cus_1").then(() => console.log(JSON.stringify(loader.cacheOutcomes())));
        """,
    )
    async with sandboxed.run() as step:
        result = await step.sandbox.commands.run(
            "agent", "node agent.js", tools={"getCustomer": get_customer}, cwd=work_dir
        )
    assert result.exit_code == 0, result.stderr
    outcomes = json.loads(result.stdout)
    assert {
        "lib/client.js",
        "lib/connection.js",
        "lib/transport.js",
        "lib/proto.js",
        "node_modules/@bufbuild/protobuf/dist/cjs/to-binary.js",
    } <= outcomes.keys()
    assert set(outcomes.values()) == {"cached"}, outcomes


async def test_an_es_module_imports_the_client_inside_bubblewrap(
    sandboxed: Bridge, work_dir: Path, write_script: Callable[[str, str], Path]
) -> None:
    write_script("agent.mjs", ESM_AGENT)
    async with sandboxed.run() as step:
        result = await step.sandbox.commands.run(
            "agent", "node agent.mjs", tools={"getCustomer": get_customer}, cwd=work_dir
        )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "12\ntrue NotFound\n"


async def test_both_runners_work_inside_bubblewrap(sandboxed: Bridge) -> None:
    tools = {"getCustomer": get_customer}
    async with sandboxed.run() as step:
        python_total = await step.sandbox.python(
            "python-total",
            'c = await tools.getCustomer("cus_1")\nreturn c["seats"] * 10',
            tools=tools,
            output=int,
        )
        typescript_total = await step.sandbox.typescript(
            "ts-total",
            'const c: { seats: number } = await tools.getCustomer("cus_1");\nreturn c.seats * 100;',
            tools=tools,
            output=int,
        )
    assert (python_total, typescript_total) == (120, 1200)
