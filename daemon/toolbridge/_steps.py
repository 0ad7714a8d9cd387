"""Durable steps: ``step.run`` and friends, each journaled and memoized by its key."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from toolbridge._attempts import run_attempts
from toolbridge._errors import ReplayMismatchError, StepError, ToolError
from toolbridge._json import dumps
from toolbridge._options import ToolOptions
from toolbridge._records import StepRecord
from toolbridge._runstate import KeyCounter, RunState
from toolbridge._tool import _call_maybe_async

if TYPE_CHECKING:
    from toolbridge._sandbox import Sandbox, Services

__all__ = ["Step", "Steps"]


def check_step_id(step_id: object) -> str:
    if not isinstance(step_id, str) or not step_id or len(step_id) > 200 or "/" in step_id:
        raise ValueError(
            f"invalid step id {step_id!r}: use a non-empty string of at most 200 characters without '/'"
        )
    return step_id


def expect_kind(rec: StepRecord, kind: str) -> StepRecord:
    """Raise when replay finds another kind of step under the same key."""
    if rec.kind != kind:
        raise ReplayMismatchError(
            f"step {rec.key!r} was recorded as a {rec.kind} step but is now asked for as a "
            f"{kind} step: the run's code changed; use a new run id"
        )
    return rec


class Steps:
    """Durable steps nested under one parent (the run itself, or a tool call).

    Each step has an id; its key in the run is the parent's key and the id, with a counter
    when the same id is used again. A step that completed returns its recorded value on
    replay without running; values come back as JSON data both times, so code behaves the
    same on a first run and on replay.
    """

    def __init__(
        self, services: Services, run: RunState, parent_key: str | None, options: ToolOptions
    ) -> None:
        self._services = services
        self._run = run
        self._parent_key = parent_key
        self._options = options
        self._keys = KeyCounter()

    @property
    def run_id(self) -> str:
        """The id of the durable run these steps belong to."""
        return self._run.run_id

    def _key(self, step_id: str) -> str:
        check_step_id(step_id)
        base = step_id if self._parent_key is None else f"{self._parent_key}/{step_id}"
        return self._keys.key(base)

    async def run(self, step_id: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` once as a durable step and return its JSON value.

        Failures are retried with backoff (``ToolOptions.attempts``); the final one is
        recorded, and raises :class:`StepError` now and on every replay.

        Raises:
            StepError: when the step failed.
        """
        key = self._key(step_id)
        rec = self._run.claim(key)
        if rec is not None and rec.done:
            return _recorded_value(expect_kind(rec, "run"), step_id)

        async def work() -> Any:
            run = self._run
            current = run.steps.get(key) or run.new_step(
                key, parent_key=self._parent_key, kind="run", name=step_id, input_json=None
            )
            run.journal.write(current)
            try:
                value = await run_attempts(
                    current,
                    lambda _attempt: _call_maybe_async(fn, *args, **kwargs),
                    attempts=self._options.attempts,
                    options=self._options,
                    journal=run.journal,
                    timeout=None,
                    what=f"step {step_id!r}",
                )
                text = dumps(value)
            except ToolError as exc:
                current.fail(exc.to_dict())
            else:
                current.complete(text)
            await run.journal.write(current)
            return _recorded_value(current, step_id)

        return await self._run.single_flight(key, work, shield=False)


def _recorded_value(rec: StepRecord, step_id: str) -> Any:
    if rec.status == "failed":
        raise StepError(step_id, rec.error or {})
    return None if rec.output_json is None else json.loads(rec.output_json)


class Step(Steps):
    """What ``bridge.run()`` yields: the run's top-level steps and its sandbox.

    Attributes:
        sandbox: Run commands and snippets whose code can call tools.
    """

    def __init__(self, services: Services, run: RunState) -> None:
        super().__init__(services, run, None, ToolOptions())
        from toolbridge._sandbox import Sandbox

        self.sandbox: Sandbox = Sandbox(services, run, self._key)
