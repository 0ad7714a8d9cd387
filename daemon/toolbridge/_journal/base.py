"""The journal's whole interface, and the factory that picks an implementation by location.

Everything the daemon stores goes through :class:`Journal`: runs and who holds them, steps,
events, sidecar tokens and their call budgets. The SQL lives only in this subpackage, so a
second dialect (PostgreSQL) is one more implementation of this protocol, not a hunt through
the code base.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from toolbridge._journal.approvals import ApprovalStore
from toolbridge._journal.functions import FunctionStore
from toolbridge._journal.null import NullJournal
from toolbridge._journal.runquery import RunQuery, ToolCall
from toolbridge._journal.sqlite import SQLiteJournal
from toolbridge._journal.sqljournal import Durability
from toolbridge._records import RunStatus, RunSummary, SidecarToken, StepRecord

__all__ = ["FROM_ENVIRONMENT", "Durability", "FromEnvironment", "Journal", "open_journal"]


class Journal(Protocol):
    """Where runs, steps, events and sidecar tokens are recorded.

    Writes are queued and committed in batches (group commit); each batch is one transaction.
    A step is written with :meth:`write` where the caller waits for the commit and with
    :meth:`write_soon` where it does not.
    A run is held by one journal at a time: :meth:`enter_run` takes its lease, the holder
    renews it, and every write for the run is fenced by it, so a journal whose lease was
    taken over can no longer write the run.

    Attributes:
        owner: Who this journal writes as (``host:pid:random``); unique per instance.
        location: Where it stores (a file path), or ``None`` when it stores nothing.
    """

    owner: str
    location: str | None

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    # -- runs and their leases -------------------------------------------------------------

    async def enter_run(self, run_id: str, *, lease: float, limit: int | None = None) -> list[StepRecord]:
        """Take the run's lease for ``lease`` seconds, mark it running, return its steps.

        The lease is taken atomically when the run is new, free, already this journal's, or
        its holder's lease has expired (a takeover: the run's fence increases).

        Args:
            limit: Return only the first ``limit`` steps (in the order they began); all of
                them by default. A run of a million steps is read a page at a time.

        Raises:
            RunBusyError: when another owner's lease on the run is live.
        """
        ...

    async def renew_run(self, run_id: str, *, lease: float) -> bool:
        """Extend this journal's lease on the run; False when the run was taken over."""
        ...

    async def release_run(self, run_id: str) -> None:
        """Give the run's lease up (the run stays recorded; anyone may enter it now)."""
        ...

    def write(self, rec: StepRecord) -> asyncio.Future[None]:
        """Queue a snapshot of ``rec`` now; await the future: it resolves once committed.

        The future fails with :class:`RunLeaseLostError` when the run was taken over.
        """
        ...

    def write_soon(self, rec: StepRecord) -> None:
        """Queue a snapshot of ``rec`` and go on, not waiting for its commit."""
        ...

    async def end_run(self, run_id: str, status: RunStatus, error: str | None = None) -> None: ...

    async def load_steps(
        self, run_id: str, *, after: int | None = None, limit: int | None = None
    ) -> list[StepRecord]:
        """The run's steps in the order they began: those numbered above ``after``, at most ``limit``."""
        ...

    async def load_step(self, run_id: str, key: str) -> StepRecord | None:
        """One step as this journal last wrote it (a write still queued counts), or ``None``."""
        ...

    async def step_keys(self, run_id: str, *, after: int = 0, limit: int) -> list[tuple[int, str]]:
        """``(seq, key)`` of the run's steps numbered above ``after``, in order, at most ``limit``."""
        ...

    async def child_keys(
        self, run_id: str, parent_key: str | None, *, after: int = 0, through: int, limit: int
    ) -> list[tuple[int, str]]:
        """``(seq, key)`` of the steps under ``parent_key`` (``None``: the run's top level) not
        marked stale, numbered above ``after`` and at most ``through``, in order, at most ``limit``.
        """
        ...

    async def list_runs(self, limit: int = 50) -> list[RunSummary]: ...

    async def get_run(self, run_id: str) -> RunSummary | None: ...

    async def find_runs(self, query: RunQuery) -> list[RunSummary]:
        """The runs ``query`` asks for, newest first (a keyset page: see ``runquery.py``)."""
        ...

    async def tool_calls(self, tool: str, *, limit: int) -> list[ToolCall]:
        """The latest ``limit`` calls of ``tool``, newest first."""
        ...

    async def cancel_run(self, run_id: str, *, by: str, channel: str, reason: str | None) -> bool:
        """End a running run as cancelled by ``by`` through ``channel``, taking its lease from
        its holder (whose commands stop at its next renewal) and cancelling its pending
        requests; False when the run is not running."""
        ...

    async def orphaned_runs(self, limit: int = 100) -> list[RunSummary]:
        """Runs still ``running`` whose holder left or let its lease run out (for recovery)."""
        ...

    # -- events ----------------------------------------------------------------------------

    async def record_event(self, event: dict[str, Any]) -> None:
        """Journal an event; returns once it is committed."""
        ...

    async def events_since(self, name: str, since: float) -> list[dict[str, Any]]:
        """Events named ``name`` sent at or after ``since``, oldest first."""
        ...

    async def get_event(self, event_id: str) -> dict[str, Any] | None: ...

    def watch_events(self, listener: Callable[[dict[str, Any]], None]) -> None:
        """Call ``listener`` with each event another daemon records, as it commits.

        A journal that other daemons cannot share at once across hosts may never call it;
        waits then find those events when they next read the journal.
        """
        ...

    # -- sidecar tokens --------------------------------------------------------------------

    async def insert_token(self, token: SidecarToken, secret_hash: bytes) -> None:
        """Store a minted token (only the hash of its secret); returns once committed."""
        ...

    async def get_token(self, token_id: str) -> SidecarToken | None: ...

    async def find_token(self, token_id: str) -> tuple[SidecarToken, bytes] | None:
        """A token and the hash of its secret, to check a presented token against."""
        ...

    async def list_tokens(self) -> list[SidecarToken]:
        """Every token, newest first."""
        ...

    async def revoke_token(self, token_id: str, *, at: float) -> bool:
        """Revoke a token; False when there is no such token or it already was."""
        ...

    async def count_token_call(self, token_id: str) -> bool:
        """Count one call against the token's budget, atomically; False when it is used up."""
        ...

    # -- requests for a person's decision (approvals.py) -----------------------------------

    @property
    def approvals(self) -> ApprovalStore: ...

    # -- durable functions other daemons of the journal serve (functions.py) ---------------

    @property
    def functions(self) -> FunctionStore: ...


class FromEnvironment:
    """The default location of a journal: whatever ``TOOLBRIDGE_JOURNAL`` says."""

    def __repr__(self) -> str:
        return "FROM_ENVIRONMENT"


FROM_ENVIRONMENT = FromEnvironment()


def open_journal(
    location: str | os.PathLike[str] | FromEnvironment | None,
    *,
    durability: Durability = "normal",
    owner: str | None = None,
) -> Journal:
    """The journal for ``location``, not yet opened (``await journal.open()``).

    Args:
        location: A file path (SQLite), a ``postgresql://`` (or ``postgres://``) URL,
            ``None`` for a journal that records nothing, or ``FROM_ENVIRONMENT`` for the
            location in ``TOOLBRIDGE_JOURNAL``.
        durability: ``"normal"`` survives a killed process, ``"full"`` a power loss too.
        owner: Who the journal writes as; a fresh ``host:pid:random`` by default.

    Raises:
        ValueError: for a location no implementation serves (another URL scheme).
    """
    if isinstance(location, FromEnvironment):
        location = os.environ.get("TOOLBRIDGE_JOURNAL") or None
        if location is None:
            raise ValueError(
                "no journal given: pass journal= (a SQLite file, a postgresql:// URL, or None to "
                "record nothing) or set TOOLBRIDGE_JOURNAL"
            )
    if location is None:
        return NullJournal()
    text = os.fspath(location)
    if text.startswith(("postgresql://", "postgres://")):
        from toolbridge._journal.postgres import PostgresJournal

        return PostgresJournal(text, durability=durability, owner=owner)
    if "://" in text:
        raise ValueError(
            f"unknown journal location {text.split('@')[-1]!r}: pass the path of a SQLite file "
            "or a postgresql:// URL"
        )
    return SQLiteJournal(Path(text), durability=durability, owner=owner)
