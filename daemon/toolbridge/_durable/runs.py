"""Entering and leaving runs: the one place a bridge opens a run and closes it.

A bridge holds one :class:`RunState` per open run id, shared by every entry of that run
(``bridge.run``, ``Bridge.call_tool``, a sidecar token's calls), so that two entries asking
for the same step at once run it once.

Across bridges (another process, or another ``Bridge`` on the same journal), a run has one
owner: the first entry takes the run's lease in the journal, a task renews it every third of
the lease while the run is open, and the last entry to leave releases it. Another bridge
entering the run meanwhile gets ``RunBusyError`` instead of running its steps a second time;
once a holder stops renewing (it was killed), its lease expires and the next entry takes the
run over, replaying what the dead holder recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from toolbridge._durable.runstate import RunState
from toolbridge._durations import Duration, seconds
from toolbridge._errors import JournalError, RunBusyError, RunLeaseLostError, RunWaiting
from toolbridge._journal.base import Journal
from toolbridge._records import RunStatus, StepRecord
from toolbridge._secrets import SecretBox, key_file_beside, state_dir
from toolbridge._telemetry import tracing

__all__ = ["Runs"]


log = logging.getLogger("toolbridge")


POLL = 0.2
"""Seconds between looks at a run held by a live holder, while waiting for it."""


RENEW_RETRY = 0.5
"""Seconds between attempts to renew a lease while the journal cannot write (at most)."""


def check_wait(wait: object) -> float:
    return seconds(wait, option="wait", allow_zero=True)


def check_lease(lease: object) -> float:
    return seconds(lease, option="run_lease")


class Runs:
    """The runs a bridge holds open.

    Args:
        journal: Where runs are recorded.
        background: Tool calls that outlive their askers; the bridge cancels them on close.
            Lease renewals run there too, so that closing the bridge stops them.
        lease: Seconds the bridge's hold on an open run lasts without renewal.
        secrets: The host's key for secrets in steps; by default the one beside the journal.
    """

    def __init__(
        self,
        journal: Journal,
        background: set[asyncio.Future[Any]],
        *,
        lease: float = 30.0,
        secrets: SecretBox | None = None,
    ) -> None:
        self._journal = journal
        self._secrets = secrets
        self._background = background
        self._lease = check_lease(lease)
        self._open: dict[str, RunState] = {}
        self._renewals: dict[str, asyncio.Task[None]] = {}

    @property
    def journal(self) -> Journal:
        """Where the runs are recorded."""
        return self._journal

    @property
    def lease(self) -> float:
        """Seconds the bridge's hold on an open run lasts without renewal."""
        return self._lease

    @property
    def secrets(self) -> SecretBox:
        """The host's key for secrets, loaded (or created beside the journal) on first use."""
        if self._secrets is None:
            self._secrets = default_secrets(self._journal)
        return self._secrets

    def get(self, run_id: str) -> RunState | None:
        """The open run ``run_id``, if an entry holds it."""
        return self._open.get(run_id)

    @property
    def default_wait(self) -> float:
        """Seconds an entry waits for a live holder by default: a little over one lease."""
        return self._lease * 1.1 + 1.0

    async def enter(self, run_id: str, *, wait: Duration | None = None) -> RunState:
        """Enter ``run_id`` (taking its lease, recording it as running); return its shared state.

        A holder known dead (a process of this machine that is gone) is taken over at once; a
        live one is waited for, up to ``wait`` seconds (:attr:`default_wait` when ``None``).

        Raises:
            RunBusyError: when another bridge still holds the run after ``wait``.
        """
        state = self._open.get(run_id)
        if state is None:
            asked = time.monotonic()
            loaded = RunState(run_id, self._journal, self._background)
            loaded.secrets = self.secrets
            recorded = await self._enter_waiting(run_id, loaded.keep, wait)
            try:
                await loaded.load(recorded)  # complete before anyone can ask it for a step
            except BaseException:
                if run_id not in self._open:  # nobody holds it here: let the lease go at once
                    with contextlib.suppress(JournalError):
                        await self._journal.release_run(run_id)
                raise
            state = self._open.get(run_id)
            if state is None:
                state = self._open[run_id] = loaded
                state.lease_deadline = asked + self._lease
                state.renew = functools.partial(self._renew_once, state)
            if run_id not in self._renewals:
                self._renew_while_open(state)
            state.entries += 1
            return state
        # Counted before the await: the last other entry leaving meanwhile must not close the
        # run under this one (an MCP retry arriving as the call it retries finishes).
        state.entries += 1
        try:
            await self._journal.enter_run(run_id, lease=self._lease, limit=0)  # its steps are here
        except BaseException:
            state.entries -= 1
            raise
        return state

    async def _enter_waiting(self, run_id: str, limit: int, wait: Duration | None) -> list[StepRecord]:
        wait = self.default_wait if wait is None else check_wait(wait)
        deadline = time.monotonic() + wait
        while True:
            try:
                return await self._journal.enter_run(run_id, lease=self._lease, limit=limit)
            except RunBusyError as busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                # Until the holder's lease would end, looking again now and then: it may leave
                # (or die, and be taken over) sooner.
                until_expiry = max(0.0, busy.expires_at - time.time()) + 0.01
                await asyncio.sleep(min(left, until_expiry, POLL))

    def _renew_while_open(self, state: RunState) -> None:
        # Not among the background calls: shutdown waits for calls, and a renewal never ends
        # by itself (a bridge closing with a run open would wait out its whole grace).
        task = asyncio.ensure_future(self._renew(state))
        self._renewals[state.run_id] = task

    async def close(self) -> None:
        """Stop renewing the leases of runs still open (the bridge is closing)."""
        renewals = list(self._renewals.values())
        self._renewals.clear()
        for task in renewals:
            task.cancel()
        await asyncio.gather(*renewals, return_exceptions=True)

    async def _renew(self, state: RunState) -> None:
        failing = False
        while True:
            await asyncio.sleep(min(self._lease / 3, RENEW_RETRY) if failing else self._lease / 3)
            try:
                if not await self._renew_once(state):
                    return
            except JournalError as exc:
                # The journal cannot write now (its server restarts, the network dropped):
                # try again soon, for as long as the run is open, so that a short outage does
                # not cost the lease. A lease that ran out meanwhile is renewed if nobody took
                # the run over, else found lost.
                if not failing:
                    log.warning("could not renew the lease on run %r (trying again): %s", state.run_id, exc)
                failing = True
                continue
            if failing:
                log.warning("renewed the lease on run %r again", state.run_id)
                failing = False

    async def _renew_once(self, state: RunState) -> bool:
        """Renew the lease now; a run found taken over is lost (its commands are stopped)."""
        asked = time.monotonic()
        if await self._journal.renew_run(state.run_id, lease=self._lease):
            state.lease_deadline = asked + self._lease
            return True
        holder = await self._journal.get_run(state.run_id)
        log.warning("lost the lease on run %r: another daemon took it over", state.run_id)
        state.lose(RunLeaseLostError(state.run_id, None if holder is None else holder.owner))
        return False

    async def leave(
        self, state: RunState, status: RunStatus | None, error: str | None = None, *, suspend: bool = False
    ) -> None:
        """Leave a run entered with :meth:`enter`.

        With a ``status``, the run is recorded as ending so now; with ``None``, it is
        recorded as completed only when its last entry leaves. With ``suspend``, it stays
        recorded as running (it waits for a person; a later entry resumes it). The last
        entry releases the run's lease.
        """
        try:
            if status is not None:
                await self._journal.end_run(state.run_id, status, error)
        finally:
            state.entries -= 1
            if state.entries == 0:
                self._open.pop(state.run_id, None)
                renewal = self._renewals.pop(state.run_id, None)
                if renewal is not None:
                    renewal.cancel()
                try:
                    if status is None and not suspend:
                        await self._journal.end_run(state.run_id, "completed")
                finally:
                    await self._journal.release_run(state.run_id)

    @contextlib.asynccontextmanager
    async def session(self, run_id: str, *, wait: Duration | None = None) -> AsyncIterator[RunState]:
        """Enter ``run_id`` for the block; its outcome is the run's.

        A block that raises ``RunWaiting`` or is cancelled leaves the run open for the next
        entry (a call waits on a person; a replay finishes it); any other exception records
        the run as failed; a block that ends records it as completed, and when it was the
        run's last entry, marks the steps that nobody asked for again as stale (other entries
        may still ask for them).
        """
        span = tracing.run_trace(run_id)
        try:
            state = await self.enter(run_id, wait=wait)
            try:
                yield state
            except RunWaiting:
                await self.leave(state, None, suspend=True)
                raise
            except Exception as exc:
                await self.leave(state, "failed", f"{type(exc).__name__}: {exc}")
                raise
            except BaseException:
                # Cancelled (the bridge is stopping, or the host gave up on the block): the
                # run stays running for a replay, and its lease goes at once.
                await self.leave(state, None, suspend=True)
                raise
            else:
                if state.entries == 1:
                    try:
                        await state.mark_stale(None)
                    except JournalError as exc:  # bookkeeping: the run's work is done all the same
                        log.warning("could not mark the steps of run %r not asked for: %s", run_id, exc)
                await self.leave(state, "completed")
        except Exception as exc:
            span.fail(exc)
            raise
        finally:
            span.end()


def default_secrets(journal: Journal) -> SecretBox:
    """The key beside a SQLite journal; for PostgreSQL, one per journal in the user's state folder.

    Hosts sharing a PostgreSQL journal must share a key: give each ``Bridge(secret_key=...)``.
    """
    path = getattr(journal, "path", None)
    if path is not None:
        return SecretBox.from_file(key_file_beside(path))
    location = getattr(journal, "location", None)
    if not location:
        return SecretBox.ephemeral()  # nothing is recorded, so nothing must open later
    state = state_dir()
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    return SecretBox.from_file(state / f"journal-{hashlib.sha256(location.encode()).hexdigest()[:16]}.key")
