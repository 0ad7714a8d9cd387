"""Fakes for testing tools and durable code fast: no sandbox process, no gRPC.

Two fakes, each standing in for one real part and nothing else (and a context for a tool
run on its own: ``await some_tool.invoke(input, tool_context(state=...))``):

- :class:`ToolHarness` calls a tool the way a sandbox does: the arguments as the exact JSON
  bytes the ``inngest_tools`` client sends, through the daemon's real call path (validation,
  hooks, attempts, replay), over a real SQLite journal in a temp dir. Only the gRPC hop is
  left out. :meth:`ToolHarness.restart` stands for a host that restarted, so replay can be
  tested too.
- :class:`FakeLauncher` is a :class:`~toolbridge._sandbox.launcher.Launcher` that runs no
  process: give it to ``Bridge(sandbox=...)`` and ``step.sandbox.commands.run(...)`` runs an
  async script of yours instead, which may call the command's tools as its code would.

Example::

    from toolbridge.testing import ToolHarness

    async def test_refund() -> None:
        async with ToolHarness({"refund": refund}) as harness:
            call = await harness.call("refund", order_id="o-1")
            assert call.result == {"refunded": True}
            await harness.restart()
            again = await harness.call("refund", order_id="o-1")
            assert again.replayed and again.result == call.result
"""

from toolbridge._tools.direct import LocalSteps, tool_context
from toolbridge.testing._call import SandboxCall, encode_call
from toolbridge.testing._harness import ToolHarness
from toolbridge.testing._launcher import FakeLauncher, FakeSandbox

__all__ = [
    "FakeLauncher",
    "FakeSandbox",
    "LocalSteps",
    "SandboxCall",
    "ToolHarness",
    "encode_call",
    "tool_context",
]
