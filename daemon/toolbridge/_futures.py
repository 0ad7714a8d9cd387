"""What every fire-and-forget future needs: its outcome retrieved by somebody."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["retrieve_outcome"]


def retrieve_outcome(future: asyncio.Future[Any]) -> None:
    """A done callback for a future nobody awaits: take its exception, if any, or asyncio
    logs "exception was never retrieved" when the future is collected."""
    if not future.cancelled():
        future.exception()
