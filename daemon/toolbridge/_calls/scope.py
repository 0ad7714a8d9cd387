"""What one token grants: a command's tools, budget and place in its run, built complete."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from opentelemetry.context import Context

from toolbridge._calls.fairness import FairShare
from toolbridge._calls.hub import ApprovalHub
from toolbridge._calls.pacing import TokenBucket
from toolbridge._durable.keycounter import KeyCounter
from toolbridge._durable.runstate import RunState
from toolbridge._durable.steps import StepsFactory
from toolbridge._options import ToolOptions
from toolbridge._sandbox.launcher import StopSignal
from toolbridge._tools.tool import Tool

__all__ = ["CALLS_REMEMBERED", "CommandScope"]

CALLS_REMEMBERED = 4096
"""The most recent calls a scope remembers by their client's id, to know one sent again."""


@dataclass(eq=False)
class CommandScope:
    """What one command's token grants: its tools, its budget, its place in the run.

    ``command_key`` is empty for a call the host makes itself (``Bridge.call_tool``): the
    call is then a top-level step of its run.
    """

    run: RunState
    command_key: str
    tools: dict[str, Tool]
    options: ToolOptions
    steps_factory: StepsFactory  # builds ctx.step for tool groups
    approvals: ApprovalHub  # where calls that need a person wait
    stop: StopSignal = field(default_factory=StopSignal)
    calls: int = 0
    in_flight: int = 0  # calls being answered now (see _calls.limits)
    streams: int = 0  # CallToolStream streams open now (see _calls.limits)
    bucket: TokenBucket | None = None  # the command's pace, made at its first call (see _calls.limits)
    share: FairShare | None = None  # the loop's fair share, found at its first call (see _calls.limits)
    keys: KeyCounter = field(init=False)  # the occurrence counts of this scope's calls
    # Counts a call where the budget persists (a sidecar token's, in the journal) and says
    # whether it is allowed; without it, ``calls`` against ``options.max_calls`` decides.
    count_call: Callable[[CommandScope], Awaitable[bool]] | None = None
    trace_context: Context | None = None  # the command's span: the parent of calls that carry none
    # Who the caller is, in errors: a sidecar's or MCP client's calls come from no command.
    caller: str = "this command"
    # The step key of each recent call by the id its client gave it (a session and a call
    # number): a client whose connection was lost sends its calls in flight again, on a new
    # connection, under the same ids, and each must meet its own step, not a new occurrence.
    sent: OrderedDict[tuple[str, int], str] = field(default_factory=OrderedDict)

    def remember(self, call_id: tuple[str, int], key: str) -> None:
        """Note the step key of the call ``call_id`` (the oldest is forgotten past the cap)."""
        self.sent[call_id] = key
        if len(self.sent) > CALLS_REMEMBERED:
            self.sent.popitem(last=False)

    def __post_init__(self) -> None:
        self.keys = KeyCounter(self.run)
