"""Serving a bridge's durable functions to the other daemons of its journal.

While a bridge is open it lists the durable functions it declares in the journal's registry
(``_journal/functions.py``): id, trigger event name and JSON Schema, under a lease of one
``run_lease`` on the database's clock, renewed every third of it (and at once when a function
is declared), and removed when the bridge closes (after the invocations it was running had
their shutdown grace: their callers keep waiting meanwhile, and new ones go to another daemon
serving the function, or wait until the rows are gone and learn that none does). A daemon
that dies stops renewing; its rows stop counting when the lease runs out, so callers then
learn that nobody serves the function instead of waiting forever.

It also looks for pending invocations of its functions (at once when a wake-up says one was
written, see ``_journal/wakeups.py``; else every ``POLL_AT_MOST`` seconds at most, sooner
while there is work) and runs each as the durable run ``FUNCTION_ID/INVOCATION_ID``
(``step.invoke`` inside it: validation, attempts, nested steps), then settles the
invocation with the result or the error. Claiming is entering the run: several daemons
serving one function race for it and the run's lease decides (the others get
``RunBusyError`` and leave it); when the winner dies, its lease expires, the invocation is
still pending, and the next daemon to look takes the run over, replaying what was recorded.
A run that ended but whose invocation was not settled (the daemon died in between) replays
to the same outcome and settles it then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from toolbridge._durable.runs import Runs
from toolbridge._durable.triggers import EnterRun
from toolbridge._errors import JournalError, RunBusyError, RunWaiting, StepError
from toolbridge._journal.functions import Invocation, ServedFunction
from toolbridge._json import dumps
from toolbridge._tools.registry import Registry

__all__ = ["FunctionServing"]

log = logging.getLogger("toolbridge")

POLL_FIRST = 0.02
"""Seconds between looks for invocations right after one was found."""
POLL_AT_MOST = 0.25
"""The longest wait between two looks for invocations, when there has been none for a while."""
BATCH = 16
"""Invocations taken per look."""
LATER = 1.0
"""Seconds before an invocation whose run could not go on (it waits for a person, the journal
was away) is looked at again."""


class FunctionServing:
    """Lists a bridge's durable functions in the journal and runs the invocations sent to them.

    Args:
        registry: The bridge's durable functions (read at each renewal and each invocation).
        enter: Enters a run (``bridge.run``).
        runs: The bridge's open runs, their journal and their lease (the registration's too).
        background: Where invocation runs go; the bridge gives them its shutdown grace.
    """

    def __init__(
        self, registry: Registry, enter: EnterRun, runs: Runs, background: set[asyncio.Future[Any]]
    ) -> None:
        self._registry = registry
        self._enter = enter
        self._runs = runs
        self._store = runs.journal.functions
        self._background = background
        self._serving: set[str] = set()
        self._later: dict[str, float] = {}  # invocations to look at again after a monotonic time
        self._task: asyncio.Task[None] | None = None
        self._listed: frozenset[str] = frozenset()
        self._declared = False  # a function was declared since the last registration
        self._wake = asyncio.Event()  # look now: a function was declared, or invoked
        self._unwatch: Callable[[], None] | None = None
        registry.declared.append(self._on_declared)

    def _on_declared(self) -> None:
        self._declared = True
        self._wake.set()

    def _on_wakeup(self, kind: str, key: str) -> None:
        if kind == "invoked" and key in self._listed:
            self._wake.set()

    async def open(self) -> None:
        """List the functions declared so far, then renew and serve in the background."""
        if self._runs.journal.location is None:
            return  # a journal that records nothing is shared with no other daemon
        await self._register()
        self._unwatch = self._store.watch(self._on_wakeup)
        self._task = asyncio.ensure_future(self._serve())

    async def stop(self) -> None:
        """Stop looking for invocations (and renewing): the bridge is closing. The rows stay
        until :meth:`unregister`, so that callers of the runs in flight keep waiting for them."""
        task, self._task = self._task, None
        if self._unwatch is not None:
            self._unwatch()
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def unregister(self) -> None:
        """Remove this daemon's registrations (once the runs in flight were drained)."""
        if self._listed:
            try:
                await self._store.unregister()
            except JournalError as exc:  # they expire with their lease all the same
                log.warning("could not remove this daemon's functions from the journal: %s", exc)

    async def _register(self) -> None:
        self._declared = False
        functions = list(self._registry.functions.values())
        listed, self._listed = self._listed, frozenset(function.id for function in functions)
        if not functions and not listed:
            return  # (a bridge without durable functions writes nothing)
        await self._store.register(
            [
                ServedFunction(
                    id=function.id,
                    event_name=function.event_name,
                    description=function.description,
                    schema=None
                    if function.trigger is None or function.trigger.schema is None
                    else function.trigger.schema.json_schema,
                )
                for function in functions
            ],
            ttl=self._runs.lease,
        )

    async def _serve(self) -> None:
        renewed = time.monotonic()
        wait = POLL_FIRST
        while True:
            self._wake.clear()  # before looking: a wake-up from now on is not lost
            try:
                if self._declared or time.monotonic() - renewed >= self._runs.lease / 3:
                    await self._register()
                    renewed = time.monotonic()
                found = await self._store.pending(limit=BATCH) if self._listed else []
            except JournalError as exc:  # the journal is away for now: look again later
                log.warning("could not serve durable functions through the journal: %s", exc)
                found = []
            now = time.monotonic()
            self._later = {key: at for key, at in self._later.items() if at > now}
            started = [self._start(invocation) for invocation in found if invocation.id not in self._serving]
            wait = POLL_FIRST if any(started) else min(wait * 2, POLL_AT_MOST)
            with contextlib.suppress(TimeoutError):
                # Serving nothing, it sleeps until a function is declared.
                await asyncio.wait_for(self._wake.wait(), wait if self._listed else None)

    def _start(self, invocation: Invocation) -> bool:
        if self._registry.functions.get(invocation.function_id) is None:
            return False
        if invocation.id in self._later:
            return False
        self._serving.add(invocation.id)
        task = asyncio.ensure_future(self._run(invocation))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(lambda _task: self._serving.discard(invocation.id))
        return True

    async def _run(self, invocation: Invocation) -> None:
        function = self._registry.functions[invocation.function_id]
        run_id = f"{function.id}/{invocation.id}"
        output = error = None
        try:
            # Not waited for: a run another daemon holds is that daemon's to finish.
            async with self._enter(run_id, wait=0) as step:
                output = dumps(await step.invoke("call", function=function, data=invocation.data))
        except RunBusyError:
            return
        except StepError as exc:
            error = {"type": exc.type, "message": exc.message, "retryable": False}
        except (JournalError, RunWaiting) as exc:
            # The journal is away, the run was taken over, or it waits for a person: looked
            # at again a little later (entering it again resumes it once decided).
            log.info("invocation %s of %r: %s", invocation.id, function.id, exc)
            self._later[invocation.id] = time.monotonic() + LATER
            return
        except Exception as exc:  # not the function's failure (that is a StepError): a fault here
            log.exception("invocation %s of %r failed", invocation.id, function.id)
            error = {"type": "InternalError", "message": f"{type(exc).__name__}: {exc}", "retryable": False}
        try:
            await self._store.settle(
                invocation.id,
                "failed" if error is not None else "completed",
                output_json=output,
                error=error,
            )
        except JournalError as exc:  # the run replays to the same outcome on the next pass
            log.warning("could not settle invocation %s of %r: %s", invocation.id, function.id, exc)
