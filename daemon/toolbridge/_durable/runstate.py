"""A run's memory while it executes: a bounded part of its steps, what was asked, calls in flight.

A run may be long (a sidecar token's million calls, a host looping on ``Bridge.call_tool``),
so its memory must not grow with it, nor the cost of a call. The journal holds every step;
the run holds only what replay needs to answer at once:

- the records being worked on (in flight, or left running by work that ended without an
  outcome): never let go, since the code working on them holds them too;
- the :data:`RECORDS_KEPT` most recently used other records (a replay of a short run, or a
  retried call, never waits on the disk);
- a :class:`KeyFilter` of the keys the journal holds and memory does not (recorded before
  the run was entered, or let go of since), a few bytes each: a fresh key is known to be new
  without a disk read (all but one in a thousand); a key that may exist is read from the
  journal (``load_step``), which answers with its last write even before that commits;
- which of the steps recorded before the run was entered were asked for again, one bit each
  (:class:`SeqSet`), so that those nobody asked for can be marked stale by a journal query
  over the parent's children;
- per :class:`~toolbridge._durable.keycounter.KeyCounter`, its most recent occurrence
  counts, and the numbers of the steps it was given (a bit each), to count an older id
  again exactly.

Entering a run reads its first :data:`RECORDS_KEPT` steps and the keys of the others, a page
at a time: a run of a million steps is never loaded whole. A replay asks for its steps again in
about the order they were recorded, so a step read back from the journal brings the
:data:`READ_AHEAD` recorded after it along: replaying a long run reads the disk once per page,
not once per step.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

from toolbridge._durable.keyfilter import KeyFilter
from toolbridge._durable.lease import RunLease
from toolbridge._durable.memory import RunMemory
from toolbridge._durable.seqset import SeqSet
from toolbridge._durable.startrecords import StartRecords
from toolbridge._futures import fail_unawaited
from toolbridge._journal.base import Journal
from toolbridge._json import digest
from toolbridge._records import StepRecord
from toolbridge._secrets import SecretBox


class Asker(Protocol):
    """A key counter as its run sees it (``keycounter.KeyCounter``): the run only tells it
    the numbers of the steps its keys were given."""

    @property
    def asked(self) -> SeqSet: ...


__all__ = ["RECORDS_KEPT", "Asker", "RunState"]

T = TypeVar("T")

RECORDS_KEPT = 1024
"""Finished records a run keeps in memory (the most recently used); the others are read back."""

PAGE = 10_000
"""Keys read from the journal at a time (entering a run, marking steps stale)."""

READ_AHEAD = 256
"""Steps read along with one read back from the journal: those recorded right after it."""


class RunState(RunLease):
    """The steps of one run as far as it executes here: some in memory, the rest in the journal.

    Its lease (still ours, renewed in time, or lost) is :class:`RunLease`'s job. One
    ``RunState`` is shared by every live entry of the same run id in a bridge, so two
    calls with the same step key at the same time run once (single flight). Build it with
    :meth:`load`, from what entering the run returned.

    Args:
        keep: Finished records kept in memory (the most recently used); :data:`RECORDS_KEPT`
            by default.
    """

    def __init__(
        self,
        run_id: str,
        journal: Journal,
        background: set[asyncio.Future[Any]] | None = None,
        *,
        keep: int | None = None,
    ) -> None:
        keep = RECORDS_KEPT if keep is None else keep
        if keep < 1:
            raise ValueError(f"a run keeps at least one record in memory, not {keep}")
        super().__init__(run_id)  # the run's lease: RunLease
        self.journal = journal
        self.secrets = SecretBox.ephemeral()
        """The host's key for secrets in this run's steps (set by ``Runs`` when it enters the run)."""
        self.start_records = StartRecords(journal)  # calls journaled as running once slow
        # Shielded work outlives its askers; the bridge cancels what is left when it closes.
        self._background = background if background is not None else set()
        self.entries = 0
        self._keep = keep
        self._live: dict[str, StepRecord] = {}  # worked on: held until the work ends
        self._done: OrderedDict[str, StepRecord] = OrderedDict()  # the others, least recent first
        # Every key the journal may hold for the run that is not in memory: those recorded
        # before the run was entered, and those that left memory since.
        self._recorded = KeyFilter()
        self._absent: str | None = None  # the last key found not recorded (asked twice in a row)
        self._inflight: dict[str, asyncio.Future[Any]] = {}
        # Counters that gave out a key whose step they have not been told the number of yet:
        # not claimed yet, or not started yet (see KeyCounter).
        self._askers: dict[str, list[Asker]] = {}
        # Steps numbered up to ``_entered_seq`` were recorded before the run was entered;
        # those asked for since are in ``_claimed``. Recorded children of a re-run parent that
        # nobody asked for again are marked stale.
        self._entered_seq = 0
        self._claimed = SeqSet()
        # Steps recorded before the run was entered that were looked up since: they may have
        # been written since (claimed, run again, marked stale), so reading ahead leaves them
        # to a read of their own, which sees a write not yet committed (see _read_ahead).
        self._looked_up = SeqSet()
        self._seq = itertools.count(1)
        self.reads = 0  # reads of the journal for records (for tests and benchmarks)
        # The run's state (ctx.state, step.state): its changes ride on the steps' records.
        self.memory = RunMemory()

    async def load(self, recorded: Sequence[StepRecord]) -> None:
        """Take in what the run recorded before it was entered.

        ``recorded`` is the run's first steps, as entering it returned them (``enter_run``
        with ``limit=keep``); when there may be more, their keys are read a page at a time.
        """
        for rec in recorded:  # in memory: their keys join the filter if they leave it
            self._entered_seq = max(self._entered_seq, rec.seq)
            self._remember(rec)
        if len(recorded) >= self._keep:  # there may be more: only their keys, a page at a time
            while True:
                page = await self.journal.step_keys(self.run_id, after=self._entered_seq, limit=PAGE)
                for seq, key in page:
                    self._recorded.add(key)
                    self._entered_seq = max(self._entered_seq, seq)
                if len(page) < PAGE:
                    break
        self._seq = itertools.count(self._entered_seq + 1)

    # -- records --------------------------------------------------------------------------

    def idempotency_key(self, step_key: str) -> str:
        """Stable for a step across attempts, replays and daemon restarts."""
        return "tbk_" + digest(f"{self.run_id}\0{step_key}", 32)

    def record(self, key: str) -> StepRecord | None:
        """The record of ``key`` if it is in memory (always so for a step being worked on)."""
        rec = self._live.get(key)
        if rec is None:
            rec = self._done.get(key)
            if rec is not None:
                self._done.move_to_end(key)
        return rec

    async def lookup(self, key: str) -> StepRecord | None:
        """The record of ``key``: from memory, else from the journal if it may be there."""
        rec = self.record(key)
        if rec is None:
            if key == self._absent:
                return None
            if key not in self._recorded:
                self._absent = key  # a fresh call's key is looked up twice: counted, then claimed
                return None
            read = await self.journal.load_step(self.run_id, key)
            self.reads += 1
            rec = self.record(key)  # recorded here while we read: that one is the newer
            if rec is None and read is not None:
                self._remember(read)
                rec = read
                if read.seq <= self._entered_seq:
                    await self._read_ahead(read.seq)
        if rec is not None and rec.seq <= self._entered_seq:
            self._looked_up.add(rec.seq)
        return rec

    async def _read_ahead(self, after: int) -> None:
        """Remember the steps recorded after step ``after`` before the run was entered.

        Only those nobody has looked up since the run was entered: their journal rows are
        their last writes. A step looked up may have a write still queued, which only
        :meth:`Journal.load_step` sees.
        """
        page = await self.journal.load_steps(self.run_id, after=after, limit=min(READ_AHEAD, self._keep))
        self.reads += 1
        for rec in page:
            if rec.seq > self._entered_seq:
                break  # recorded since the run was entered: never read ahead
            if rec.seq in self._looked_up or rec.key in self._live or rec.key in self._done:
                continue
            self._remember(rec)

    async def claim(self, key: str, *, by: Asker | None = None) -> StepRecord | None:
        """Note that ``key`` was asked for (through ``by``), and return its record if there is one.

        A record that is not finished is held in memory from now on: the asker runs it.
        """
        rec = await self.lookup(key)
        if rec is None:
            if by is not None:  # told the step's number when it starts (new_step)
                self.given(key, by)
            return None
        if by is not None:
            by.asked.add(rec.seq)
            askers = self._askers.get(key)
            if askers is not None and by in askers:
                askers.remove(by)
                if not askers:
                    del self._askers[key]
        if rec.seq <= self._entered_seq:
            self._claimed.add(rec.seq)
        if rec.done:
            self.memory.replay(rec)  # answered from the journal: the state as it was then
        else:
            self.hold(rec)
        if rec.stale:
            rec.stale = False
            self.journal.write_soon(rec)
        return rec

    async def take(self, key: str) -> StepRecord | None:
        """The record of ``key`` for the work on it: a record not finished is held in memory
        until that work ends (see :meth:`single_flight`). ``None`` when there is none.
        """
        rec = await self.lookup(key)
        if rec is not None and not rec.done:
            self.hold(rec)
        return rec

    def given(self, key: str, counter: Asker) -> None:
        """Note that ``counter`` gave out ``key``: it learns the step's number when there is one."""
        askers = self._askers.setdefault(key, [])
        if counter not in askers:
            askers.append(counter)

    def gave(self, key: str, counter: Asker) -> bool:
        """Whether ``counter`` gave out ``key`` and has not learnt its step's number yet."""
        return counter in self._askers.get(key, ())

    def hold(self, rec: StepRecord) -> None:
        """Keep ``rec`` in memory until the work on its key ends (it runs, or runs again)."""
        self._done.pop(rec.key, None)
        self._live[rec.key] = rec
        if rec.on_done is None:  # worked on from now: its outcome records the state's changes
            rec.on_done = self.memory.recorder()

    def new_step(
        self, key: str, *, parent_key: str | None, kind: str, name: str, input_json: str | None
    ) -> StepRecord:
        rec = StepRecord(
            run_id=self.run_id,
            key=key,
            parent_key=parent_key,
            seq=next(self._seq),
            kind=kind,
            name=name,
            idempotency_key=self.idempotency_key(key),
            input_json=input_json,
        )
        self.hold(rec)
        self._absent = None  # (its key joins the filter once it leaves memory)
        for counter in self._askers.pop(key, ()):
            counter.asked.add(rec.seq)
        return rec

    def _remember(self, rec: StepRecord) -> None:
        """Keep a record in the bounded part (one read from the journal, or whose work ended).

        A record read back that is still running (interrupted) stays there too: nothing works
        on it until it is claimed, which holds it.
        """
        self._done[rec.key] = rec
        self._done.move_to_end(rec.key)
        while len(self._done) > self._keep:
            key, _ = self._done.popitem(last=False)
            self._recorded.add(key)  # out of memory, into the filter: asked again, it is read back

    def _finished(self, key: str) -> None:
        """The work on ``key`` ended: a finished record joins the bounded part."""
        self._inflight.pop(key, None)
        self._askers.pop(key, None)
        rec = self._live.get(key)
        if rec is not None and rec.done:
            del self._live[key]
            self._remember(rec)

    @property
    def keep(self) -> int:
        """Finished records the run keeps in memory."""
        return self._keep

    @property
    def in_memory(self) -> int:
        """How many records the run holds in memory now."""
        return len(self._live) + len(self._done)

    @property
    def nbytes(self) -> int:
        """The memory of the run's compact structures (the key filter, the asked marks)."""
        return self._recorded.nbytes + self._claimed.nbytes + self._looked_up.nbytes

    # -- work -----------------------------------------------------------------------------

    async def single_flight(
        self, key: str, work: Callable[[], Awaitable[T]], *, shield: bool, detached: bool = False
    ) -> T:
        """Run ``work`` once for ``key``; concurrent askers share its outcome.

        With ``shield``, the work finishes (and is recorded) even when every asker is
        cancelled, as a tool call must once it has started: it runs in a task of its own.
        ``detached`` says the asking task is itself never cancelled by whoever asked (a
        stream's task per call outlives the stream), so the work runs in it, with no task
        and no shield: two turns of the event loop fewer. Shutdown still sees it, and may
        cancel it once its grace is over, as it would the task.
        """
        existing = self._inflight.get(key)
        if existing is not None:
            return await asyncio.shield(existing)
        if self.lost is not None or self._renewal_due():  # most calls need no coroutine to check
            await self.check_lease()
        existing = self._inflight.get(key)  # another asker started it while we checked
        if existing is not None:
            return await asyncio.shield(existing)
        if shield and detached:
            return await self._run_here(key, work)
        task: asyncio.Future[T] = asyncio.ensure_future(work())
        self._inflight[key] = task
        task.add_done_callback(lambda _: self._finished(key))
        if shield:
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return await (asyncio.shield(task) if shield else task)

    async def _run_here(self, key: str, work: Callable[[], Awaitable[T]]) -> T:
        shared: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._inflight[key] = shared
        task = asyncio.current_task()
        assert task is not None
        self._background.add(task)
        try:
            value = await work()
        except asyncio.CancelledError:
            shared.cancel()
            raise
        except BaseException as exc:
            fail_unawaited(shared, exc)  # nobody else may have asked
            raise
        else:
            shared.set_result(value)
            return value
        finally:
            self._finished(key)
            self._background.discard(task)

    async def mark_stale(self, parent_key: str | None) -> list[str]:
        """Mark recorded children of ``parent_key`` that this execution did not ask for.

        Only steps recorded before the run was entered can be such children; the journal
        lists them a page at a time, and only those not asked for are read.

        Returns:
            Their keys, in the order they were first recorded.
        """
        marked: list[str] = []
        after = 0
        while after < self._entered_seq:
            page = await self.journal.child_keys(
                self.run_id, parent_key, after=after, through=self._entered_seq, limit=PAGE
            )
            for seq, key in page:
                if seq in self._claimed:
                    continue
                rec = await self.lookup(key)
                # Asked for while we read, or marked by another pass meanwhile: leave it.
                if rec is None or rec.stale or rec.seq in self._claimed:
                    continue
                rec.stale = True
                self.journal.write_soon(rec)
                marked.append(key)
            if len(page) < PAGE:
                break
            after = page[-1][0]
        return marked
