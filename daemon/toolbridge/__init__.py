"""toolbridge: let code in a sandbox call back into your app's tools, each call a durable step.

The public surface is listed in ``__all__``; everything else lives in private modules and may
change without notice. The exception tree is documented in ``toolbridge._errors``.
"""

from toolbridge._bridge import Bridge
from toolbridge._commands.commands import CommandResult
from toolbridge._definitions.build import (
    DefinitionWarning,
    DroppedConstraint,
    ToolDefinitions,
    tool_definitions,
)
from toolbridge._door.policy import Egress, EgressRule, Secret
from toolbridge._durable.steps import Steps
from toolbridge._errors import (
    ApprovalError,
    JournalError,
    NonRetriableError,
    ReplayMismatchError,
    RunBusyError,
    RunLeaseLostError,
    RunWaiting,
    SandboxError,
    SnippetError,
    StepError,
    ToolbridgeError,
    ToolError,
)
from toolbridge._journal.approvals import ApprovalRequest
from toolbridge._options import ToolOptions
from toolbridge._sandbox.bwrap.launcher import BwrapLauncher
from toolbridge._sandbox.bwrap.limits import SandboxLimits
from toolbridge._sandbox.launcher import Launcher, LaunchSpec, ProcessOutcome, StopSignal
from toolbridge._server.sidecar import SidecarToken
from toolbridge._step import Step
from toolbridge._tools.builtin import ask_user, request_approval
from toolbridge._tools.context import ToolContext
from toolbridge._tools.events import Event, EventType, event_type
from toolbridge._tools.functions import DurableFunction, FunctionContext, FunctionRef, function_ref
from toolbridge._tools.shim import ShimCall
from toolbridge._tools.tool import Tool, tool

__all__ = [
    "ApprovalError",
    "ApprovalRequest",
    "Bridge",
    "BwrapLauncher",
    "CommandResult",
    "DefinitionWarning",
    "DroppedConstraint",
    "DurableFunction",
    "Egress",
    "EgressRule",
    "Event",
    "EventType",
    "FunctionContext",
    "FunctionRef",
    "JournalError",
    "LaunchSpec",
    "Launcher",
    "NonRetriableError",
    "ProcessOutcome",
    "ReplayMismatchError",
    "RunBusyError",
    "RunLeaseLostError",
    "RunWaiting",
    "SandboxError",
    "SandboxLimits",
    "Secret",
    "ShimCall",
    "SidecarToken",
    "SnippetError",
    "Step",
    "StepError",
    "Steps",
    "StopSignal",
    "Tool",
    "ToolContext",
    "ToolDefinitions",
    "ToolError",
    "ToolOptions",
    "ToolbridgeError",
    "ask_user",
    "event_type",
    "function_ref",
    "request_approval",
    "tool",
    "tool_definitions",
]
