"""Durable functions: started by an event or invoked by a step, and usable as tools.

A durable function is a handler with a trigger (an :class:`EventType`). It runs as a durable
run when its event is sent, as a nested step when ``step.invoke`` calls it, and as a tool when
it is given to a command: the sandbox's named arguments become the event's data, checked
against the trigger's schema, and the caller gets the function's result.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from toolbridge._errors import ToolError
from toolbridge._records import now
from toolbridge._schema.schema import SchemaValidationError
from toolbridge._schema.signature import describe
from toolbridge._tools.context import StepsAPI, ToolContext, resolve_function
from toolbridge._tools.events import Event, EventType
from toolbridge._tools.tool import Tool, call_maybe_async

__all__ = ["DurableFunction", "FunctionContext", "FunctionRef", "function_ref"]


@dataclass(frozen=True)
class FunctionContext:
    """What a durable function's handler receives.

    Attributes:
        event: The event that started it (or the data it was invoked with).
        step: Durable steps, nested under this function's run or call.
        run_id: The durable run it belongs to.
    """

    event: Event
    step: StepsAPI
    run_id: str

    @property
    def state(self) -> MutableMapping[str, Any]:
        """The run's state, shared with its tools and host (see ``ToolContext.state``)."""
        return self.step.state


@dataclass(frozen=True)
class DurableFunction:
    """A handler with an id and a trigger. Declare one with ``@bridge.function(...)``."""

    id: str
    trigger: EventType | None
    handler: Callable[[FunctionContext], Any]
    description: str = ""

    @property
    def event_name(self) -> str:
        return self.trigger.name if self.trigger is not None else f"invoke/{self.id}"

    def event(self, data: dict[str, Any], event_id: str) -> Event:
        """The event a direct call (a tool call, an invoke) runs the handler with."""
        return Event(name=self.event_name, data=data, id=event_id, ts=now())

    async def call(self, event: Event, step: StepsAPI, run_id: str) -> Any:
        return await call_maybe_async(self.handler, FunctionContext(event=event, step=step, run_id=run_id))

    def __toolbridge_tool__(self) -> Tool:
        """The function as a tool: named arguments become the event data."""
        schema = self.trigger.schema if self.trigger is not None else None

        async def run_as_tool(args: Any, ctx: ToolContext) -> Any:
            data = schema.to_jsonable(args) if schema is not None else args
            return await self.call(self.event(dict(data), f"inv_{ctx.idempotency_key}"), ctx.step, ctx.run_id)

        return Tool(
            kind="group",
            handler=run_as_tool,
            description=self.description,
            input_schema=schema,
            # Like an event schema that strips what it does not know: extra fields are ignored.
            strict=False,
        )


@dataclass(frozen=True)
class FunctionRef:
    """A durable function named by its id, found when it is called: see :func:`function_ref`."""

    id: str
    description: str = ""

    def __toolbridge_tool__(self) -> Tool:
        """The reference as a tool: the sandbox's named arguments become the event data."""

        async def run_referenced(args: Any, ctx: ToolContext) -> Any:
            function = await resolve_function(self, ctx.step.find_function)
            schema = function.trigger.schema if function.trigger is not None else None
            if schema is not None:
                try:
                    data = schema.to_jsonable(schema.validate_python(args, strict=False))
                except SchemaValidationError as exc:
                    raise ToolError(
                        f"invalid arguments for {self.id!r}: {exc}", type="ValidationError"
                    ) from None
            else:
                data = args
            return await function.call(
                function.event(dict(data), f"inv_{ctx.idempotency_key}"), ctx.step, ctx.run_id
            )

        return Tool(
            kind="group",
            handler=run_referenced,
            description=self.description or f"Run the durable function {self.id!r}",
            input_schema=None,  # the function's trigger schema checks the call, when it is found
            strict=False,
        )


def function_ref(id: str, *, description: str = "") -> FunctionRef:
    """A tool (and a ``step.invoke`` target) that names a durable function by id.

    Inngest's ``referenceFunction()``: the function may be declared in another module, after
    the tools are given, or on another daemon sharing the journal. Each call finds it by id:
    among the functions declared on the bridge that serves the call
    (``@bridge.function(id=...)``), where it runs as the call's step like a function given
    itself; else among those another daemon of the journal serves, where it runs as a durable
    run of its own (the call waits for it; a replay does not run it again). The arguments
    are checked against its trigger schema (the one that daemon registered) first.

    Args:
        id: The durable function's id.
        description: What the model is told the tool does.

    Raises:
        ValueError: for an empty id.

    A call fails with ``ToolError`` ``FunctionNotFound`` when no daemon of the journal serves
    that id, and ``ValidationError`` for arguments its trigger schema refuses.
    """
    if not isinstance(id, str) or not id:
        raise ValueError("function_ref needs the id of a durable function")
    return FunctionRef(id=id, description=description)


def _check_handler(handler: Callable[..., Any], function_id: str) -> None:
    """Refuse, when it is declared, a handler that cannot take the one ``ctx`` it is given
    (else every call would fail as an ``InternalError``, retried to no avail).

    Raises:
        TypeError: naming the handler's signature and the one expected.
    """
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):
        return  # (a builtin: nothing to check)
    try:
        signature.bind(object())
    except TypeError:
        raise TypeError(
            f"the handler of durable function {function_id!r} takes {signature}; it must take "
            "one argument, the FunctionContext: def handler(ctx): ... (ctx.event, ctx.step)"
        ) from None


def make_function(
    handler: Callable[[FunctionContext], Any], *, id: str, trigger: EventType | None, description: str | None
) -> DurableFunction:
    """Build a durable function, checking what it was declared with.

    Raises:
        ValueError: for an empty id.
        TypeError: for a handler that is not callable or a trigger that is not an EventType.
    """
    if not isinstance(id, str) or not id:
        raise ValueError("a durable function needs a non-empty id")
    if not callable(handler):
        raise TypeError(f"a durable function's handler must be a function, got {handler!r}")
    _check_handler(handler, id)
    if trigger is not None and not isinstance(trigger, EventType):
        raise TypeError("trigger= takes event_type(name, schema=...)")
    return DurableFunction(
        id=id, trigger=trigger, handler=handler, description=description or describe(handler)[0]
    )
