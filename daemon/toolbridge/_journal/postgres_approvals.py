"""Requests for a person's decision, in the PostgreSQL journal.

The same table, statements and semantics as SQLite's (:mod:`.approvals`): the statements are
written with ``?`` placeholders there and numbered (``$1``, ``$2``...) here, and the times are
``BIGINT`` (a PostgreSQL ``INTEGER`` is four bytes, too small for epoch milliseconds).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from toolbridge._journal import approvals as a
from toolbridge._journal.commit import Pending

__all__ = ["APPROVALS_MIGRATION", "PostgresApprovals", "decide_requests", "insert_requests"]

Conn = asyncpg.Connection | PoolConnectionProxy

APPROVALS_MIGRATION: tuple[str, ...] = tuple(
    re.sub(r"\bINTEGER\b", "BIGINT", statement) for statement in a.APPROVALS_MIGRATION
)


def numbered(sql: str) -> str:
    """``?`` placeholders as PostgreSQL's ``$1``, ``$2``, ... (the statements hold no literal ?)."""
    counter = itertools.count(1)
    return re.sub(r"\?", lambda _: f"${next(counter)}", sql)


async def insert_requests(conn: Conn, writes: list[Pending]) -> None:
    await conn.executemany(numbered(a._INSERT), [pending.params for pending in writes])


async def decide_requests(conn: Conn, writes: list[Pending]) -> None:
    for pending in writes:
        sql, params = pending.params
        pending.result = bool(await conn.fetch(numbered(sql), *params))


class PostgresApprovals(a.SQLiteApprovals):
    """The requests in the PostgreSQL journal; writes through its group commit."""

    def __init__(self, fetch: Callable[..., Awaitable[Sequence[Any]]], queue: a.Queue) -> None:
        self._pg_fetch = fetch
        self._queue = queue

    async def _fetch(self, where: str, params: tuple[Any, ...]) -> list[a.ApprovalRequest]:
        found = await self._pg_fetch(numbered(f"SELECT {a._COLUMNS} FROM approvals {where}"), *params)
        return [a._from_row(tuple(row)) for row in found]
