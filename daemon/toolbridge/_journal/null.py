"""A journal that records nothing: no replay, no trace, no leases, no sidecar tokens.

For measuring what journaling costs (``Bridge(journal=None)``), and for CLI commands that
need a bridge but no record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from toolbridge._errors import JournalError
from toolbridge._journal.approvals import MemoryApprovals
from toolbridge._journal.functions import NoFunctions
from toolbridge._journal.runquery import RunQuery, ToolCall
from toolbridge._records import RunStatus, RunSummary, SidecarToken, StepRecord

__all__ = ["NullJournal"]

_NO_TOKENS = "sidecar tokens are kept in the journal: open the Bridge with a journal file, not journal=None"


class NullJournal:
    """Records nothing. Runs are not leased: nothing is shared to guard."""

    owner = "nobody"
    location: str | None = None

    def __init__(self) -> None:
        self.approvals = MemoryApprovals()  # requests for a person still work, in memory
        self.functions = NoFunctions()  # nothing is shared with another daemon

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def enter_run(self, run_id: str, *, lease: float, limit: int | None = None) -> list[StepRecord]:
        return []

    async def renew_run(self, run_id: str, *, lease: float) -> bool:
        return True

    async def release_run(self, run_id: str) -> None:
        return None

    def write(self, rec: StepRecord) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

    def write_soon(self, rec: StepRecord) -> None:
        return None

    async def end_run(self, run_id: str, status: RunStatus, error: str | None = None) -> None:
        return None

    async def load_steps(
        self, run_id: str, *, after: int | None = None, limit: int | None = None
    ) -> list[StepRecord]:
        return []

    async def load_step(self, run_id: str, key: str) -> StepRecord | None:
        return None

    async def step_keys(self, run_id: str, *, after: int = 0, limit: int) -> list[tuple[int, str]]:
        return []

    async def child_keys(
        self, run_id: str, parent_key: str | None, *, after: int = 0, through: int, limit: int
    ) -> list[tuple[int, str]]:
        return []

    async def list_runs(self, limit: int = 50) -> list[RunSummary]:
        return []

    async def get_run(self, run_id: str) -> RunSummary | None:
        return None

    async def find_runs(self, query: RunQuery) -> list[RunSummary]:
        return []

    async def tool_calls(self, tool: str, *, limit: int) -> list[ToolCall]:
        return []

    async def cancel_run(self, run_id: str, *, by: str, channel: str, reason: str | None) -> bool:
        return False

    async def record_event(self, event: dict[str, Any]) -> None:
        return None

    async def events_since(self, name: str, since: float) -> list[dict[str, Any]]:
        return []

    async def get_event(self, event_id: str) -> dict[str, Any] | None:
        return None

    def watch_events(self, listener: Callable[[dict[str, Any]], None]) -> None:
        return None

    async def orphaned_runs(self, limit: int = 100) -> list[RunSummary]:
        return []

    async def insert_token(self, token: SidecarToken, secret_hash: bytes) -> None:
        raise JournalError(_NO_TOKENS)

    async def get_token(self, token_id: str) -> SidecarToken | None:
        return None

    async def find_token(self, token_id: str) -> tuple[SidecarToken, bytes] | None:
        return None  # no token is known, so every sidecar token is refused

    async def list_tokens(self) -> list[SidecarToken]:
        raise JournalError(_NO_TOKENS)

    async def revoke_token(self, token_id: str, *, at: float) -> bool:
        raise JournalError(_NO_TOKENS)

    async def count_token_call(self, token_id: str) -> bool:
        return False
