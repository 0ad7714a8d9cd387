"""Durable steps: ``step.run`` and friends, each journaled and memoized by its key."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from toolbridge._durable.attempts import run_attempts
from toolbridge._durable.clock import deadline_in, remaining
from toolbridge._durable.eventbus import EventBus
from toolbridge._durable.identity import arguments_identity, expect_step, function_name
from toolbridge._durable.keycounter import KeyCounter
from toolbridge._durable.remote import find_remote
from toolbridge._durable.runstate import RunState
from toolbridge._durations import Duration
from toolbridge._durations import seconds as to_seconds
from toolbridge._errors import StepError, ToolError
from toolbridge._journal.functions import FunctionStore
from toolbridge._json import canonical, dumps
from toolbridge._options import ToolOptions
from toolbridge._records import StepRecord, now
from toolbridge._schema.schema import SchemaValidationError
from toolbridge._tools.context import resolve_function
from toolbridge._tools.events import Event
from toolbridge._tools.functions import FunctionRef
from toolbridge._tools.tool import call_maybe_async

if TYPE_CHECKING:
    from toolbridge._tools.context import Invocable

__all__ = ["ClaimStep", "Steps", "StepsFactory", "nested_steps"]


def check_step_id(step_id: object) -> str:
    if not isinstance(step_id, str) or not step_id or len(step_id) > 200 or "/" in step_id:
        raise ValueError(
            f"invalid step id {step_id!r}: use a non-empty string of at most 200 characters without '/'"
        )
    return step_id


class Steps:
    """Durable steps nested under one parent (the run itself, or a tool call).

    Each step has an id; its key in the run is the parent's key and the id, with a counter
    when the same id is used again. A step that completed returns its recorded value on
    replay without running; values come back as JSON data both times, so code behaves the
    same on a first run and on replay.
    """

    def __init__(
        self,
        events: EventBus,
        run: RunState,
        parent_key: str | None,
        options: ToolOptions,
        *,
        functions: Mapping[str, Invocable] | None = None,
        remote: FunctionStore | None = None,
    ) -> None:
        self._events = events
        self._functions: Mapping[str, Invocable] = {} if functions is None else functions
        self._remote = remote
        self._run = run
        self._parent_key = parent_key
        self._options = options
        self._keys = KeyCounter(run)

    @property
    def run_id(self) -> str:
        """The id of the durable run these steps belong to."""
        return self._run.run_id

    def function(self, function_id: str) -> Invocable | None:
        """The durable function declared with ``function_id`` on this bridge, if there is one."""
        return self._functions.get(function_id)

    async def find_function(self, function_id: str) -> Invocable | None:
        """The function declared with ``function_id`` on this bridge, else the one another
        daemon of the journal serves (see :mod:`_durable.remote`), else ``None``."""
        found = self._functions.get(function_id)
        if found is None and self._remote is not None:
            return await find_remote(self._remote, function_id)
        return found

    @property
    def state(self) -> MutableMapping[str, Any]:
        """The run's state, shared with its tools (``ctx.state``); see :mod:`_durable.memory`."""
        return self._run.memory

    async def _claim(self, step_id: str) -> tuple[str, StepRecord | None]:
        """The key of this use of ``step_id``, noted as asked for, and its record if there is one."""
        check_step_id(step_id)
        base = step_id if self._parent_key is None else f"{self._parent_key}/{step_id}"
        key = await self._keys.key(base)
        return key, await self._run.claim(key, by=self._keys)

    async def _durable(
        self,
        step_id: str,
        kind: str,
        body: Callable[[StepRecord], Awaitable[Any]],
        *,
        input_value: Any = None,
        identity: Mapping[str, Any] | None = None,
        nests: bool = False,
    ) -> Any:
        """Run ``body`` once as the step ``step_id``; replay returns what it recorded.

        ``body`` gets the step's record (fresh, or left ``running`` by an interrupted run, to
        resume from) and returns the step's value, or raises :class:`ToolError` to record a
        failure. ``identity`` (part of ``input_value``) must match what was recorded.
        """
        key, rec = await self._claim(step_id)
        if rec is not None and rec.done:
            return _recorded_value(expect_step(rec, kind, identity), step_id)

        async def work() -> Any:
            run = self._run
            current = await run.take(key)
            if current is not None and current.done:  # finished while we waited to start
                return _recorded_value(expect_step(current, kind, identity), step_id)
            if current is not None:
                expect_step(current, kind, identity)  # an interrupted step resumes as itself
            else:
                input_json = None if input_value is None else canonical(input_value)
                current = run.new_step(
                    key, parent_key=self._parent_key, kind=kind, name=step_id, input_json=input_json
                )
            run.journal.write_soon(current)
            try:
                text = dumps(await body(current))
            except ToolError as exc:
                current.fail(exc.to_dict())
            else:
                current.complete(text)
            if nests:
                await run.mark_stale(key)
            await run.journal.write(current)
            return _recorded_value(current, step_id)

        return await self._run.single_flight(key, work, shield=False)

    def _nested(self, parent_key: str) -> Steps:
        return Steps(
            self._events, self._run, parent_key, self._options, functions=self._functions, remote=self._remote
        )

    async def run(self, step_id: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` once as a durable step and return its JSON value.

        Failures are retried with backoff (``ToolOptions.attempts``); the final one is
        recorded, and raises :class:`StepError` now and on every replay.

        Raises:
            StepError: when the step failed.
        """

        async def body(rec: StepRecord) -> Any:
            return await run_attempts(
                rec,
                lambda _attempt: call_maybe_async(fn, *args, **kwargs),
                attempts=self._options.attempts,
                options=self._options,
                journal=self._run.journal,
                timeout=None,
                what=f"step {step_id!r}",
            )

        identity = {
            "function": function_name(fn),
            "arguments": arguments_identity(args, kwargs, self._run.secrets),
        }
        return await self._durable(step_id, "run", body, input_value=identity, identity=identity)

    async def sleep(self, step_id: str, seconds: Duration) -> None:
        """Pause durably: a replay after a crash sleeps only what is left.

        ``seconds`` is a number or a duration string (``"250ms"``, ``"5m"``). Inside a tool,
        the sleep counts against the call's ``tool_timeout``.
        """
        seconds = to_seconds(seconds, option="seconds", allow_zero=True)

        async def body(rec: StepRecord) -> None:
            recorded = json.loads(rec.input_json or "{}")
            # Recorded before this version: only the wall-clock wake-up time.
            deadline = recorded.get("deadline") or {"seconds": recorded["seconds"], "at": recorded["wake_at"]}
            await self._run.journal.write(rec)  # the deadline is on disk before we wait
            await asyncio.sleep(remaining(deadline))  # asyncio's clock is monotonic

        wake = deadline_in(seconds)
        await self._durable(
            step_id, "sleep", body, input_value={"seconds": seconds, "wake_at": wake["at"], "deadline": wake}
        )

    async def send_event(self, step_id: str, events: EventLike | Sequence[EventLike]) -> list[str]:
        """Send one event or several, once: a replay does not send them again.

        Args:
            step_id: The step's id.
            events: ``{"name": "order/refunded", "data": {...}}``, an :class:`Event`, or a list.

        Returns:
            The ids of the events sent.
        """
        batch = [_as_event(item) for item in (events if isinstance(events, Sequence) else [events])]

        async def body(rec: StepRecord) -> list[str]:
            return [(await self._events.publish(event.name, event.data)).id for event in batch]

        ids: list[str] = await self._durable(
            step_id, "send_event", body, input_value=[{"name": e.name, "data": e.data} for e in batch]
        )
        return ids

    async def wait_for_event(
        self, step_id: str, *, event: str, timeout: Duration, match: Callable[[Event], bool] | None = None
    ) -> Event | None:
        """Wait for an event sent after this step started; ``None`` when ``timeout`` passes.

        One wait blocks at most ``ToolOptions.wait_window`` at a time: each window that
        passes without the event is recorded, and a fresh window continues until the
        timeout, so a long wait makes visible progress and resumes after a crash with the
        time that is left.

        Args:
            step_id: The step's id.
            event: The event name to wait for.
            timeout: Seconds to wait in all (a number, or a duration string such as ``"1h"``).
            match: Accepts or rejects a candidate event (for example, by an order id).
        """
        timeout = to_seconds(timeout, option="timeout", allow_zero=True)

        async def body(rec: StepRecord) -> dict[str, Any] | None:
            recorded = json.loads(rec.input_json or "{}")
            # Recorded before this version: the wall-clock start only.
            deadline = recorded.get("deadline") or {"seconds": timeout, "at": rec.started_at + timeout}
            since = recorded.get("since", rec.started_at)
            while True:
                window = min(self._options.wait_window, remaining(deadline))
                opened = now()
                found = await self._events.wait(event, since=since, match=match, timeout=window)
                if found is not None:
                    return found.to_dict()
                if remaining(deadline) <= 0:
                    return None
                rec.attempt_log.append(
                    {"window": len(rec.attempt_log) + 1, "started_at": opened, "finished_at": now()}
                )
                self._run.journal.write_soon(rec)

        found = await self._durable(
            step_id,
            "wait_for_event",
            body,
            input_value={
                "event": event,
                "timeout": timeout,
                "deadline": deadline_in(timeout),
                "since": self._events.clock(),
            },
            identity={"event": event},
        )
        return None if found is None else Event.from_dict(found)

    async def invoke(self, step_id: str, *, function: Invocable | FunctionRef | str, data: Any = None) -> Any:
        """Run a durable function as a nested step and return its result.

        ``function`` is the function, or its id (``function_ref("refund")`` or ``"refund"``),
        found when the step runs among the functions declared on this bridge, else among
        those another daemon of the journal serves. ``data`` is checked against the
        function's trigger schema. The function's own steps are journaled under this one
        (or, on another daemon, in a run of their own there), so a retry or replay skips
        those that completed and never runs the function twice for this step.

        Raises:
            StepError: when the data is invalid or the function failed.
            ToolError: ``FunctionNotFound`` when no daemon of the journal serves that id.
        """
        function = await resolve_function(function, self.find_function)

        async def body(rec: StepRecord) -> Any:
            try:
                payload = function.trigger.validate(data or {}) if function.trigger else dict(data or {})
            except SchemaValidationError as exc:
                raise ToolError(f"invalid data for {function.id!r}: {exc}", type="ValidationError") from None
            event = function.event(payload, f"inv_{rec.idempotency_key}")
            return await run_attempts(
                rec,
                lambda _attempt: function.call(event, self._nested(rec.key), self._run.run_id),
                attempts=self._options.attempts,
                options=self._options,
                journal=self._run.journal,
                timeout=None,
                what=f"function {function.id!r}",
            )

        identity = {"function": function.id}
        return await self._durable(
            step_id, "invoke", body, input_value=identity, identity=identity, nests=True
        )


EventLike = Mapping[str, Any] | Event


def _as_event(value: EventLike) -> Event:
    if isinstance(value, Event):
        return value
    if not isinstance(value, Mapping) or not isinstance(value.get("name"), str) or not value["name"]:
        raise ValueError('an event is {"name": "...", "data": {...}} or an Event')
    return Event(name=value["name"], data=dict(value.get("data") or {}))


def _recorded_value(rec: StepRecord, step_id: str) -> Any:
    if rec.status == "failed":
        raise StepError(step_id, rec.error or {})
    return None if rec.output_json is None else json.loads(rec.output_json)


ClaimStep = Callable[[str], Awaitable[tuple[str, StepRecord | None]]]
"""Claims a step id of a ``Steps`` (``Steps._claim``): its key for this use, and its record."""

StepsFactory = Callable[[RunState, str, ToolOptions], Steps]
"""Builds the ``ctx.step`` of a tool call: the steps nested under that call's key."""


def nested_steps(
    events: EventBus, functions: Mapping[str, Invocable] | None = None, remote: FunctionStore | None = None
) -> StepsFactory:
    """The factory a command's scope uses to give tool groups their ``ctx.step``.

    ``functions``: the durable functions ``function_ref`` and ``step.invoke`` find by id (the
    bridge's own mapping, so a function declared later is found at call time); ``remote``:
    the journal's registry, where they find those other daemons serve.
    """
    return lambda run, parent_key, options: Steps(
        events, run, parent_key, options, functions=functions, remote=remote
    )
