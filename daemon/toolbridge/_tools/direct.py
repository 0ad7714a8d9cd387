"""``await some_tool.invoke(input)``: a tool run here and now, with no bridge, journal or sandbox.

The same order as a call from a sandbox (validate, ``on_start``, the handler, ``on_finish``,
the output check, ``on_error`` on a failure after the start) without what makes that call
durable: nothing is journaled, retried or replayed. The default context is a test one: its
``ctx.step`` runs each step inline (:class:`LocalSteps`), its ``ctx.state`` is a plain dict.
"""

from __future__ import annotations

import asyncio
import copy
import secrets
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from toolbridge._durations import seconds as to_seconds
from toolbridge._errors import ToolError
from toolbridge._records import now
from toolbridge._schema.schema import SchemaValidationError
from toolbridge._tools.context import Invocable, ToolContext, resolve_function
from toolbridge._tools.events import Event
from toolbridge._tools.invoke import call_hook, call_maybe_async

if TYPE_CHECKING:
    from toolbridge._tools.functions import DurableFunction, FunctionRef
    from toolbridge._tools.tool import BoundCall, Tool

__all__ = ["LocalSteps", "invoke_directly", "tool_context"]


class LocalSteps:
    """``ctx.step`` for a tool run directly: each step runs inline, once per call, unjournaled.

    ``sleep`` sleeps, ``send_event`` records the events in :attr:`sent`, ``wait_for_event``
    finds none (it returns ``None`` at once), ``invoke`` calls the function in place.
    """

    def __init__(
        self,
        run_id: str = "test-run",
        state: MutableMapping[str, Any] | None = None,
        functions: Sequence[DurableFunction] = (),
    ) -> None:
        self._run_id = run_id
        self._functions: dict[str, Invocable] = {function.id: function for function in functions}
        self._state: MutableMapping[str, Any] = {} if state is None else state
        self.sent: list[Event] = []

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def state(self) -> MutableMapping[str, Any]:
        return self._state

    async def run(self, step_id: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await call_maybe_async(fn, *args, **kwargs)

    async def sleep(self, step_id: str, seconds: float | str) -> None:
        await asyncio.sleep(to_seconds(seconds, option="seconds", allow_zero=True))

    async def send_event(
        self, step_id: str, events: Mapping[str, Any] | Event | Sequence[Mapping[str, Any] | Event]
    ) -> list[str]:
        batch = events if isinstance(events, Sequence) else [events]
        ids = []
        for item in batch:
            event = (
                item
                if isinstance(item, Event)
                else Event(
                    name=item["name"],
                    data=dict(item.get("data") or {}),
                    id=f"evt_{secrets.token_hex(8)}",
                    ts=now(),
                )
            )
            self.sent.append(event)
            ids.append(event.id)
        return ids

    async def wait_for_event(
        self, step_id: str, *, event: str, timeout: float | str, match: Callable[[Event], bool] | None = None
    ) -> Event | None:
        return None

    def function(self, function_id: str) -> Invocable | None:
        return self._functions.get(function_id)

    async def find_function(self, function_id: str) -> Invocable | None:
        return self._functions.get(function_id)  # no journal: no other daemon

    async def invoke(self, step_id: str, *, function: Invocable | FunctionRef | str, data: Any = None) -> Any:
        function = await resolve_function(function, self.find_function)
        payload = function.trigger.validate(data or {}) if function.trigger else dict(data or {})
        event = function.event(payload, f"inv_{secrets.token_hex(8)}")
        return await function.call(event, self, self._run_id)


def tool_context(
    *,
    tool_name: str = "tool",
    run_id: str = "test-run",
    state: MutableMapping[str, Any] | None = None,
    attempt: int = 1,
    functions: Sequence[DurableFunction] = (),
) -> ToolContext:
    """A :class:`ToolContext` for running a tool outside a bridge (``tool.invoke(input, ctx)``).

    Args:
        tool_name: What ``ctx.tool_name`` says.
        run_id: What ``ctx.run_id`` says.
        state: The run state the tool sees as ``ctx.state`` (and ``ctx.network.state``);
            a fresh dict by default. Pass one dict to several calls to share it.
        attempt: What ``ctx.attempt`` says.
        functions: Durable functions ``function_ref`` and ``ctx.step.invoke`` find by id.
    """
    state = {} if state is None else state
    return ToolContext(
        run_id=run_id,
        step_key=f"{tool_name}@direct",
        idempotency_key=f"tbk_direct_{secrets.token_hex(8)}",
        attempt=attempt,
        tool_name=tool_name,
        step=LocalSteps(run_id, state, functions),
        state=state,
    )


async def invoke_directly(tool: Tool, input: Any, ctx: ToolContext | None) -> Any:
    """See :meth:`Tool.invoke`."""
    if ctx is None:
        ctx = tool_context(tool_name=tool.name or str(getattr(tool.handler, "__name__", "tool")))
    if tool.human is not None or tool.requires_confirmation is not False:
        raise ToolError(
            f"tool {ctx.tool_name!r} waits for a person's decision, which needs a bridge: "
            "call it with bridge.call_tool(...) or from a sandbox",
            type="ApprovalRequired",
        )
    bound = _bind(tool, input)
    if tool.on_start is not None:
        try:
            bound = tool.rebind(await call_hook(tool.on_start, copy.deepcopy(bound.input)))
        except SchemaValidationError as exc:
            raise ToolError(f"invalid arguments after on_start: {exc}", type="ValidationError") from None
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(f"on_start refused the call: {exc}", type="Refused") from exc
    try:
        value = await _run(tool, bound, ctx)
        if tool.on_finish is not None:
            value = await call_hook(tool.on_finish, value)
        try:
            return tool.result_to_jsonable(value)
        except SchemaValidationError as exc:
            raise ToolError(f"tool {ctx.tool_name!r} returned {exc}", type="OutputValidationError") from None
    except ToolError as error:
        if tool.on_error is None:
            raise
        raise await _rewritten(tool, error) from error


def _bind(tool: Tool, input: Any) -> BoundCall:
    positional: list[Any] = []
    named: dict[str, Any] = {}
    if isinstance(input, list):
        positional = input
    elif isinstance(input, Mapping):
        named = dict(input)
    elif input is not None:
        positional = [input]
    try:
        return tool.bind(positional, named, b"")
    except SchemaValidationError as exc:
        raise ToolError(f"invalid arguments: {exc}", type="ValidationError") from None


async def _run(tool: Tool, bound: BoundCall, ctx: ToolContext) -> Any:
    try:
        return await tool.run_handler(bound, ctx)
    except ToolError:
        raise
    except Exception as exc:
        raise ToolError(f"tool {ctx.tool_name!r} failed: {exc!r}", type="InternalError") from exc


async def _rewritten(tool: Tool, error: ToolError) -> ToolError:
    assert tool.on_error is not None
    try:
        replacement = await call_hook(tool.on_error, error)
    except ToolError as raised:
        return raised
    if not isinstance(replacement, ToolError):
        return ToolError(
            f"on_error returned {replacement!r}; it returns a ToolError or None", type="InternalError"
        )
    return replacement
