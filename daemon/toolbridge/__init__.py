"""toolbridge: let code in a sandbox call back into your app's tools, each call a durable step.

The public surface is listed in ``__all__``; everything else lives in private modules and may
change without notice. The exception tree is documented in ``toolbridge._errors``.
"""

from toolbridge._bridge import Bridge
from toolbridge._bwrap import BwrapLauncher, SandboxLimits
from toolbridge._definitions import DefinitionWarning, DroppedConstraint, ToolDefinitions, tool_definitions
from toolbridge._errors import (
    JournalError,
    NonRetriableError,
    ReplayMismatchError,
    SandboxError,
    SnippetError,
    StepError,
    ToolbridgeError,
    ToolError,
)
from toolbridge._events import Event, EventType, event_type
from toolbridge._functions import DurableFunction, FunctionContext
from toolbridge._options import ToolOptions
from toolbridge._sandbox import CommandResult
from toolbridge._sidecar import SidecarToken
from toolbridge._steps import Step, Steps
from toolbridge._tool import Tool, ToolContext, tool

__all__ = [
    "Bridge",
    "BwrapLauncher",
    "CommandResult",
    "DefinitionWarning",
    "DroppedConstraint",
    "DurableFunction",
    "Event",
    "EventType",
    "FunctionContext",
    "JournalError",
    "NonRetriableError",
    "ReplayMismatchError",
    "SandboxError",
    "SandboxLimits",
    "SidecarToken",
    "SnippetError",
    "Step",
    "StepError",
    "Steps",
    "Tool",
    "ToolContext",
    "ToolDefinitions",
    "ToolError",
    "ToolOptions",
    "ToolbridgeError",
    "event_type",
    "tool",
    "tool_definitions",
]
