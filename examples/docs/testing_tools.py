"""Testing your tools in milliseconds: ToolHarness and FakeLauncher (no process, no gRPC).

Written as pytest tests; run directly, it runs them itself.
"""

import asyncio
import tempfile
from pathlib import Path

from pydantic import BaseModel

from toolbridge import tool
from toolbridge.testing import FakeLauncher, FakeSandbox, ToolHarness


class Refund(BaseModel):
    invoice_id: str
    amount: int


def do_refund(args: Refund) -> dict[str, int]:
    return {"refunded": args.amount}


get_customer = tool.step(run=lambda args: {"name": "Acme Corp"})

# --8<-- [start:harness]
refund = tool.step(run=do_refund, input=Refund, at_most_once=True)


async def test_refund_replays() -> None:
    async with ToolHarness({"refund": refund}) as harness:
        first = await harness.call("refund", invoice_id="inv_1", amount=50)
        assert first.result == {"refunded": 50}
        bad = await harness.call("refund", invoice_id="inv_1", amount="lots")
        assert bad.error is not None and bad.error.type == "ValidationError"
        await harness.restart()  # a host that stopped and came back on the same journal
        again = await harness.call("refund", invoice_id="inv_1", amount=50)
        assert again.replayed and again.result_json == first.result_json


# --8<-- [end:harness]


# --8<-- [start:launcher]
async def test_agent_without_a_process(tmp_path: Path) -> None:
    async def agent(sandbox: FakeSandbox) -> int:
        customer = await sandbox.call("getCustomer", id="cus_1")
        sandbox.write(customer["name"])
        return 0  # the exit code

    launcher = FakeLauncher(agent)
    async with launcher.bridge(tmp_path / "journal.db") as bridge, bridge.run("order-42") as step:
        result = await step.sandbox.commands.run(
            "agent", "python agent.py", tools={"getCustomer": get_customer}
        )
    assert result.stdout == "Acme Corp"


# --8<-- [end:launcher]


async def main() -> None:
    await test_refund_replays()
    with tempfile.TemporaryDirectory() as folder:
        await test_agent_without_a_process(Path(folder))


if __name__ == "__main__":
    asyncio.run(main())
