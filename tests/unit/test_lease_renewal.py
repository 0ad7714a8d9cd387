"""A run's lease is renewed again after the journal failed a renewal (a restart, a cut)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

from toolbridge import JournalError
from toolbridge._durable.runs import Runs


class FlakyJournal:
    """Fails its first two renewals, as a journal whose server is restarting does."""

    def __init__(self) -> None:
        self.renewals = 0
        self.renewed = asyncio.Event()

    async def renew_run(self, run_id: str, *, lease: float) -> bool:
        self.renewals += 1
        if self.renewals <= 2:
            raise JournalError("journal write failed: [Errno 111] Connection refused")
        self.renewed.set()
        return True


async def test_a_renewal_the_journal_failed_is_tried_again_until_it_succeeds() -> None:
    journal = FlakyJournal()
    runs = Runs(cast(Any, journal), set(), lease=0.3)
    state = SimpleNamespace(run_id="r", lease_deadline=0.0, lost=None)
    renewing = asyncio.ensure_future(runs._renew(cast(Any, state)))
    try:
        await asyncio.wait_for(journal.renewed.wait(), 10)
    finally:
        renewing.cancel()
    assert journal.renewals == 3
    assert state.lease_deadline > 0  # renewed: the run is still this bridge's
    assert state.lost is None
