"""What every fire-and-forget future needs: its outcome retrieved by somebody."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["fail_unawaited", "retrieve_outcome"]


def retrieve_outcome(future: asyncio.Future[Any]) -> None:
    """A done callback for a future nobody awaits: take its exception, if any, or asyncio
    logs "exception was never retrieved" when the future is collected."""
    if not future.cancelled():
        future.exception()


def fail_unawaited(future: asyncio.Future[Any], exc: BaseException) -> None:
    """``future.set_exception(exc)`` for a future nobody may await, without asyncio's complaint.

    Only a failure can be "never retrieved", so a future that usually succeeds is given
    :func:`retrieve_outcome` here, when it fails, rather than when it is made: a done callback
    costs a turn of the event loop when the future is settled, on every call's path.
    """
    future.add_done_callback(retrieve_outcome)
    future.set_exception(exc)
