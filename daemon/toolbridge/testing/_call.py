"""A call made as the sandbox client makes it: its bytes, its outcome, its refusals."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolbridge._calls.call import CallOutcome, call_tool
from toolbridge._calls.host import _REFUSAL_TYPES
from toolbridge._calls.scope import CommandScope
from toolbridge._errors import ProtocolError, ToolError

__all__ = ["SandboxCall", "call_as_sandbox", "encode_call", "refused"]


def encode_call(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """The bytes the sandbox client sends for ``tools.name(*args, **kwargs)``.

    A JSON array of the positional arguments and a JSON object of the named ones, each empty
    when there is none, encoded as ``inngest_tools`` encodes them (compact, UTF-8, no NaN).

    Raises:
        ToolError: ``InvalidArgument`` for values that are not JSON, as the client raises.
    """

    def encode(value: Any) -> bytes:
        try:
            return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
        except (TypeError, ValueError) as exc:
            raise ToolError(f"arguments must be JSON values: {exc}", type="InvalidArgument") from None

    return (encode(list(args)) if args else b"", encode(dict(kwargs)) if kwargs else b"")


@dataclass(frozen=True)
class SandboxCall:
    """What the sandbox received for one call.

    Attributes:
        step_key: The call's step in the run (empty for a call refused before it had one).
        result_json: The result as the sandbox received it, when the call succeeded.
        error: The error the sandbox's client raises, when it failed (refusals included:
            ``ToolNotFound``, ``InvalidArgument``, ``RequestTooLarge``, ``Unauthenticated``).
        replayed: True when the outcome came from the journal without running the tool.
    """

    step_key: str
    result_json: str | None = None
    error: ToolError | None = None
    replayed: bool = False

    @property
    def result(self) -> Any:
        """The result as JSON data, as ``await tools.name(...)`` returns it.

        Raises:
            ToolError: the call's error, as ``await tools.name(...)`` raises it.
        """
        if self.error is not None:
            raise self.error
        return json.loads(self.result_json or "null")


def _sandbox_call(outcome: CallOutcome) -> SandboxCall:
    return SandboxCall(outcome.step_key, outcome.result_json, outcome.error, outcome.replayed)


def refused(exc: ProtocolError) -> SandboxCall:
    """A refusal as the sandbox sees it: the ToolError its client raises for the status."""
    return SandboxCall("", error=ToolError(exc.message, type=_REFUSAL_TYPES.get(exc.code, "ProtocolError")))


async def call_as_sandbox(
    scope: CommandScope, name: str, positional_json: bytes, named_json: bytes
) -> SandboxCall:
    """Make one call with ``scope``'s grant, as the server does for a sandbox's request."""
    try:
        return _sandbox_call(await call_tool(scope, name, positional_json, named_json))
    except ProtocolError as exc:
        return refused(exc)
