"""What a running tool sees of its call: :class:`ToolContext`, and ``ctx.step`` as a protocol.

The protocol lets tools (and durable functions) be declared without importing the replay
engine that implements it (``_durable.steps.Steps``), which sits a layer above.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from toolbridge._tools.events import Event, EventType

__all__ = ["Invocable", "StepsAPI", "ToolContext"]


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

    async def run(self, step_id: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...

    async def sleep(self, step_id: str, seconds: float) -> None: ...

    async def send_event(
        self, step_id: str, events: Mapping[str, Any] | Event | Sequence[Mapping[str, Any] | Event]
    ) -> list[str]: ...

    async def wait_for_event(
        self, step_id: str, *, event: str, timeout: float, match: Callable[[Event], bool] | None = None
    ) -> Event | None: ...

    async def invoke(self, step_id: str, *, function: Invocable, data: Any = None) -> Any: ...


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
    """

    run_id: str
    step_key: str
    idempotency_key: str
    attempt: int
    tool_name: str
    step: StepsAPI
