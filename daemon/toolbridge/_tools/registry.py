"""What a bridge has registered: its tools by name, and its durable functions by id."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from toolbridge._tools.convert import to_tool, to_tools
from toolbridge._tools.events import EventType
from toolbridge._tools.functions import DurableFunction, FunctionContext, make_function
from toolbridge._tools.tool import Tool, check_tool_name

__all__ = ["Registry"]

F = TypeVar("F", bound=Callable[..., Any])


class Registry:
    """A bridge's tools and durable functions, checked as they are added.

    Args:
        tools: The tools given at construction (``Bridge(tools=...)``): a dict of name ->
            tool, or a list of named tools.
    """

    def __init__(self, tools: Mapping[str, object] | Sequence[object]) -> None:
        self.tools: dict[str, Tool] = to_tools(tools)
        self.functions: dict[str, DurableFunction] = {}
        self.declared: list[Callable[[], None]] = []
        """Told when a durable function is declared (the bridge lists it in the journal)."""

    def add_tool(self, value: object, name: str | None = None) -> None:
        """Register ``value`` under ``name`` (by default its ``__name__``).

        Raises:
            ValueError: for an invalid or already registered name.
            TypeError: for a value that is not a tool.
        """
        tool_name = check_tool_name(name or getattr(value, "__name__", ""))
        if tool_name in self.tools:
            raise ValueError(f"a tool named {tool_name!r} is already registered on this bridge")
        self.tools[tool_name] = to_tool(value)

    def decorator(self, name: str | None) -> Callable[[F], F]:
        """A decorator registering a function under ``name`` and returning it unchanged."""

        def register(func: F) -> F:
            self.add_tool(func, name)
            return func

        return register

    def declare(
        self,
        handler: Callable[[FunctionContext], Any],
        *,
        id: str,
        trigger: EventType | None,
        description: str | None,
    ) -> DurableFunction:
        """Declare a durable function.

        Raises:
            ValueError: for an empty id or one already declared.
            TypeError: for a handler that is not callable or a trigger that is not an EventType.
        """
        declared = make_function(handler, id=id, trigger=trigger, description=description)
        if id in self.functions:
            raise ValueError(f"a function with id {id!r} is already declared on this bridge")
        self.functions[id] = declared
        for listener in self.declared:
            listener()
        return declared

    def triggered_by(self, event_name: str) -> list[DurableFunction]:
        """The functions an event of this name starts."""
        return [
            function
            for function in self.functions.values()
            if function.trigger is not None and function.trigger.name == event_name
        ]
