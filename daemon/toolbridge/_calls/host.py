"""A registered tool called by the host itself (``Bridge.call_tool``, ``toolbridge call``).

The call takes the same path as one from a sandbox: arguments as JSON bytes, validation,
hooks, attempts, the journal. Only the caller differs: there is no command, so the call is
a top-level step of its run, and protocol refusals become a ``ToolError`` of the type the
sandbox client would raise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolbridge._calls.approvals import SUSPENDED
from toolbridge._calls.call import call_tool
from toolbridge._calls.hub import ApprovalHub
from toolbridge._calls.scope import CommandScope
from toolbridge._durable.runstate import RunState
from toolbridge._durable.steps import StepsFactory
from toolbridge._errors import ProtocolError, RunWaiting, ToolError
from toolbridge._json import dumps
from toolbridge._options import ToolOptions
from toolbridge._tools.tool import Tool

__all__ = ["call_registered_tool", "encode_arguments"]

# The ToolError types the sandbox client raises for the same refusals (see inngest_tools).
_REFUSAL_TYPES = {
    "NOT_FOUND": "ToolNotFound",
    "INVALID_ARGUMENT": "InvalidArgument",
    "RESOURCE_EXHAUSTED": "RequestTooLarge",
    "UNAUTHENTICATED": "Unauthenticated",
}


def encode_arguments(arguments: Mapping[str, Any] | Sequence[Any] | None) -> tuple[bytes, bytes]:
    """The wire form of a host call's arguments: (positional JSON array, named JSON object).

    A mapping is the named arguments, a list or tuple the positional ones; each part is
    empty when there is none, as on the wire.

    Raises:
        TypeError: for anything else, or for values that are not JSON.
    """
    if arguments is None:
        return b"", b""
    try:
        if isinstance(arguments, Mapping):
            return b"", dumps(dict(arguments)).encode() if arguments else b""
        if isinstance(arguments, (list, tuple)):
            return dumps(list(arguments)).encode() if arguments else b"", b""
    except ValueError as exc:
        raise TypeError(f"arguments must be JSON data: {exc}") from exc
    kind = type(arguments).__name__
    raise TypeError(f"arguments must be a dict (named arguments) or a list (positional ones), not {kind}")


async def call_registered_tool(
    steps_factory: StepsFactory,
    run: RunState,
    tools: Mapping[str, Tool],
    name: str,
    arguments: Mapping[str, Any] | Sequence[Any] | None,
    options: ToolOptions,
    approvals: ApprovalHub,
) -> Any:
    """Call ``tools[name]`` as a durable step of ``run`` and return its JSON result.

    Raises:
        RunWaiting: when the call still waits for a person after ``options.approval_hold``.
        ToolError: the call's failure (now, or as recorded when the run is replayed).
        TypeError: for arguments that are not JSON.
    """
    positional, named = encode_arguments(arguments)
    scope = CommandScope(
        run=run,
        command_key="",
        tools=dict(tools),
        options=options,
        steps_factory=steps_factory,
        approvals=approvals,
        caller="this call",
    )
    try:
        outcome = await call_tool(scope, name, positional, named)
    except ProtocolError as exc:
        raise ToolError(exc.message, type=_REFUSAL_TYPES.get(exc.code, "ProtocolError")) from None
    if outcome.error is not None and outcome.error.type == SUSPENDED:
        raise RunWaiting(run.run_id, await approvals.store.list(run_id=run.run_id, states=["pending"]))
    if outcome.error is not None:
        raise outcome.error
    return json.loads(outcome.result_json or "null")
