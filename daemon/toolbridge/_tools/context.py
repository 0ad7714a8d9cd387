"""What a running tool sees of its call: :class:`ToolContext`, and ``ctx.step`` as a protocol.

The protocol lets tools (and durable functions) be declared without importing the replay
engine that implements it (``_durable.steps.Steps``), which sits a layer above.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from toolbridge._errors import ToolError
from toolbridge._tools.events import Event, EventType

if TYPE_CHECKING:
    from toolbridge._tools.functions import FunctionRef

__all__ = ["Invocable", "Network", "StepsAPI", "ToolContext", "not_served", "resolve_function"]


class Invocable(Protocol):
    """What ``ctx.step.invoke`` runs: a durable function (``_tools.functions.DurableFunction``).

    A protocol, so that this module need not import the functions module, which imports it.
    """

    @property
    def id(self) -> str: ...

    @property
    def trigger(self) -> EventType | None: ...

    def event(self, data: dict[str, Any], event_id: str) -> Event: ...

    async def call(self, event: Event, step: StepsAPI, run_id: str) -> Any: ...


class StepsAPI(Protocol):
    """Durable steps nested under a parent: what ``ctx.step`` offers."""

    @property
    def run_id(self) -> str: ...

    @property
    def state(self) -> MutableMapping[str, Any]: ...

    async def run(self, step_id: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...

    async def sleep(self, step_id: str, seconds: float) -> None: ...

    async def send_event(
        self, step_id: str, events: Mapping[str, Any] | Event | Sequence[Mapping[str, Any] | Event]
    ) -> list[str]: ...

    async def wait_for_event(
        self, step_id: str, *, event: str, timeout: float, match: Callable[[Event], bool] | None = None
    ) -> Event | None: ...

    async def invoke(
        self, step_id: str, *, function: Invocable | FunctionRef | str, data: Any = None
    ) -> Any: ...

    def function(self, function_id: str) -> Invocable | None: ...

    async def find_function(self, function_id: str) -> Invocable | None:
        """The function declared with ``function_id`` on this bridge, else one that another
        daemon of the journal serves (called through the journal), else ``None``."""
        ...


@dataclass(frozen=True)
class Network:
    """``ctx.network`` for code written against AgentKit: ``ctx.network.state`` is ``ctx.state``."""

    state: MutableMapping[str, Any]


@dataclass(frozen=True)
class ToolContext:
    """What a running tool knows about its call.

    Attributes:
        run_id: The durable run the call belongs to.
        step_key: The call's step key, unique in the run.
        idempotency_key: Identical for every attempt and every replay of this call. Pass it
            to APIs that deduplicate writes.
        attempt: 1 for the first attempt, 2 for the first retry, and so on.
        tool_name: The name the sandbox called the tool by.
        step: Durable steps nested under this call (``ctx.step.run``, ``ctx.step.sleep``, ...).
        state: The run's state, a mapping shared by every tool of the run (and the host's
            ``step.state``). Values must be JSON data. A change is journaled with the step
            that made it and restored on replay (see :mod:`toolbridge._durable.memory`).
    """

    run_id: str
    step_key: str
    idempotency_key: str
    attempt: int
    tool_name: str
    step: StepsAPI
    state: MutableMapping[str, Any] = field(default_factory=dict)

    @property
    def network(self) -> Network:
        """AgentKit's spelling of the run's state: ``ctx.network.state``."""
        return Network(self.state)

    @property
    def agent(self) -> None:
        """AgentKit passes the calling agent; a sandbox's call has none."""
        return None


async def resolve_function(
    function: Invocable | FunctionRef | str, find: Callable[[str], Awaitable[Invocable | None]]
) -> Invocable:
    """The function itself, or the one a reference (``function_ref``) or an id names.

    Raises:
        ToolError: ``FunctionNotFound`` when no daemon of the journal serves that id.
    """
    if not isinstance(function, str) and getattr(function, "call", None) is not None:
        return cast("Invocable", function)  # (a reference has only an id)
    function_id = function if isinstance(function, str) else function.id
    found = await find(function_id)
    if found is None:
        raise not_served(function_id)
    return found


def not_served(function_id: str) -> ToolError:
    """The error of a call naming a durable function that no daemon of the journal serves."""
    return ToolError(
        f"no daemon of this journal serves function {function_id!r}: declare it with "
        f"@bridge.function(id={function_id!r}, ...) on a daemon that shares this journal, "
        "and keep that daemon open",
        type="FunctionNotFound",
    )
