"""Occurrence counters: the same id asked for again gets the next key (``agent#2``), exactly.

A long-lived counter (a sidecar token's calls) sees millions of ids; it keeps only the most
recent counts and counts an older id again from its run (see :class:`KeyCounter`).
"""

from __future__ import annotations

from collections import OrderedDict

from toolbridge._durable.runstate import RunState
from toolbridge._durable.seqset import SeqSet

__all__ = ["COUNTS_KEPT", "KeyCounter"]

COUNTS_KEPT = 1024
"""Occurrence counts a :class:`KeyCounter` keeps in memory (the most recently used)."""


class KeyCounter:
    """Gives repeated ids distinct keys: ``agent``, ``agent#2``, ``agent#3``...

    Counts belong to one counter (a command's calls, one ``Steps``): another counter asking
    for the same id starts at ``agent`` again, and meets what the first recorded. The
    :data:`COUNTS_KEPT` most recently used counts are kept in memory; an older one is counted
    again from the run: the keys ``base``, ``base#2``, ... whose steps this counter was given
    (their numbers are in ``asked``, about a bit each). A base the run never recorded counts
    0 at once, without a disk read.
    """

    def __init__(self, run: RunState, *, keep: int | None = None) -> None:
        self._run = run
        self._keep = COUNTS_KEPT if keep is None else keep
        self._counts: OrderedDict[str, int] = OrderedDict()
        self.asked = SeqSet()  # the numbers of the steps this counter's keys were given

    async def key(self, base: str) -> str:
        count = self._counts.get(base)
        if count is None:
            count = await self._recount(base)
        else:
            self._counts.move_to_end(base)
        count += 1
        self._counts[base] = count
        if len(self._counts) > self._keep:
            self._counts.popitem(last=False)
        key = base if count == 1 else f"{base}#{count}"
        self._run.given(key, self)  # counted as given from now on, claimed or not
        return key

    async def _recount(self, base: str) -> int:
        # The keys given to this counter are base, base#2, ... base#count: "given" holds up to
        # the count and not after, so a search finds it in a few lookups however large it is.
        if not await self._given(base, 1):
            return 0
        low, high = 1, 2
        while await self._given(base, high):
            low, high = high, high * 2
        while high - low > 1:
            middle = (low + high) // 2
            if await self._given(base, middle):
                low = middle
            else:
                high = middle
        return low

    async def _given(self, base: str, count: int) -> bool:
        """Whether this counter gave out the ``count``-th key of ``base``."""
        key = base if count == 1 else f"{base}#{count}"
        if self._run.gave(key, self):  # given, its step not claimed or started yet
            return True
        rec = await self._run.lookup(key)
        return rec is not None and rec.seq in self.asked
