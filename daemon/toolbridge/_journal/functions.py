"""Durable functions across daemons: who serves which, and the invocations sent to them.

Daemons sharing a journal may declare different durable functions. Each one lists those it
serves in ``function_servers`` (id, trigger event name, the trigger's JSON Schema, itself),
under a lease on the database's clock (the host's for SQLite, whose daemons share one host)
that it renews while it is open and deletes when it closes cleanly; a daemon that dies stops
renewing, and its rows stop counting once the lease runs out. A ``function_ref`` call that
finds no local function reads the live rows, validates against the schema there, and writes
an ``invocations`` row; a serving daemon claims it by entering its run (the run lease and
its fence decide between daemons), runs it, and settles the row, once: settling is a
compare-and-swap on ``state = 'pending'`` (as deciding an approval is), so that a caller who
gave up (its server left) and a late server cannot both win.

:class:`SQLFunctions` is the real store (both dialects); :class:`NoFunctions` serves a bridge
without a journal (``Bridge(journal=None)``), which shares nothing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from toolbridge._journal.statements import FUNCTIONS, Statement, Write
from toolbridge._journal.wakeups import NOTIFY, Kind, Listener, Wakeups, notice

__all__ = [
    "FUNCTIONS_MIGRATION",
    "FunctionServer",
    "FunctionStore",
    "Invocation",
    "InvocationState",
    "NoFunctions",
    "SQLFunctions",
    "ServedFunction",
]

InvocationState = Literal["pending", "completed", "failed"]
ErrorDict = dict[str, Any]
"""An error as ``ToolError.to_dict`` gives it: ``{"type", "message", "retryable", ...}``."""

FUNCTIONS_MIGRATION: tuple[str, ...] = (
    """CREATE TABLE function_servers (
        function_id   TEXT NOT NULL,
        owner         TEXT NOT NULL,
        event_name    TEXT NOT NULL,
        description   TEXT NOT NULL,
        schema_json   TEXT,
        registered_at INTEGER NOT NULL,
        expires_at    INTEGER NOT NULL,
        PRIMARY KEY (function_id, owner)
    )""",
    "CREATE INDEX function_servers_by_owner ON function_servers (owner)",
    """CREATE TABLE invocations (
        invocation_id TEXT PRIMARY KEY,
        function_id   TEXT NOT NULL,
        data_json     TEXT NOT NULL,
        caller_run_id TEXT NOT NULL,
        state         TEXT NOT NULL CHECK (state IN ('pending', 'completed', 'failed')),
        created_at    INTEGER NOT NULL,
        finished_at   INTEGER,
        served_by     TEXT,
        output_json   TEXT,
        error_json    TEXT
    )""",
    "CREATE INDEX invocations_pending ON invocations (function_id, created_at) WHERE state = 'pending'",
)
"""The migration that adds both tables (one of each dialect's numbered migrations)."""


@dataclass(frozen=True)
class ServedFunction:
    """What a daemon registers of a durable function it serves.

    Attributes:
        id: The function's id.
        event_name: The name of the event its handler receives.
        description: What it does.
        schema: Its trigger's JSON Schema, or ``None`` for any data.
    """

    id: str
    event_name: str
    description: str = ""
    schema: dict[str, Any] | None = None


@dataclass(frozen=True)
class FunctionServer(ServedFunction):
    """A live registration: a function, and the daemon (journal owner) serving it until when."""

    owner: str = ""
    expires_at: float = 0.0


@dataclass(frozen=True)
class Invocation:
    """One call of a durable function sent through the journal to a daemon that serves it.

    Attributes:
        id: Names it; the caller's step decides it (``inv_`` and the step's idempotency key),
            so a retry or replay of that step finds the same invocation.
        function_id: The function called.
        data: The event data, as validated by the caller.
        caller_run_id: The run of the step that called.
        state: ``pending``, then ``completed`` or ``failed``, once.
        output_json: The function's result (JSON text), when completed.
        error: ``{"type", "message", ...}``, when failed.
        served_by: The daemon that settled it.
    """

    id: str
    function_id: str
    data: dict[str, Any]
    caller_run_id: str
    state: InvocationState = "pending"
    created_at: float = 0.0
    finished_at: float | None = None
    served_by: str | None = None
    output_json: str | None = None
    error: dict[str, Any] | None = None


class FunctionStore(Protocol):
    """The registry of served functions and their invocations. Writes return once committed."""

    def watch(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` when an invocation is written or settled (see ``wakeups.py``), so
        that a poll can look at once; returns the function that stops it."""
        ...

    async def register(self, functions: Sequence[ServedFunction], *, ttl: float) -> None:
        """List (or list again, renewing) the functions this journal's owner serves for ``ttl``
        seconds; its rows for functions no longer among them are removed."""
        ...

    async def unregister(self) -> None:
        """Remove every row of this journal's owner (a clean shutdown)."""
        ...

    async def servers(self, function_id: str) -> list[FunctionServer]:
        """The live registrations of ``function_id``, the longest-lived first."""
        ...

    async def request(self, invocation: Invocation) -> Invocation:
        """Record ``invocation`` unless one with its id exists; return the one kept."""
        ...

    async def get(self, invocation_id: str) -> Invocation | None: ...

    async def pending(self, *, limit: int) -> list[Invocation]:
        """Pending invocations of functions this journal's owner serves (live rows), oldest
        first, but for those whose run (``FUNCTION_ID/INVOCATION_ID``) a live lease holds."""
        ...

    async def settle(
        self, invocation_id: str, state: InvocationState, *, output_json: str | None, error: ErrorDict | None
    ) -> bool:
        """Settle a pending invocation; False when it was settled already (it keeps that outcome)."""
        ...


_SERVER_COLUMNS = "function_id, event_name, description, schema_json, owner, expires_at"
_INVOCATION_COLUMNS = (
    "invocation_id, function_id, data_json, caller_run_id, state, created_at, finished_at, "
    "served_by, output_json, error_json"
)

REGISTER = Statement("""
    INSERT INTO function_servers
        (function_id, owner, event_name, description, schema_json, registered_at, expires_at)
    VALUES (?, ?, ?, ?, ?, {now}, {now} + ?)
    ON CONFLICT (function_id, owner) DO UPDATE SET
        event_name = excluded.event_name, description = excluded.description,
        schema_json = excluded.schema_json, expires_at = excluded.expires_at
""")
UNREGISTER = Statement("DELETE FROM function_servers WHERE owner = ?")
FORGET_EXPIRED = Statement("DELETE FROM function_servers WHERE expires_at <= {now}")
SERVERS = Statement(
    f"SELECT {_SERVER_COLUMNS} FROM function_servers WHERE function_id = ? AND expires_at > {{now}} "
    "ORDER BY expires_at DESC, owner"
)
REQUEST = Statement(
    f"INSERT INTO invocations ({_INVOCATION_COLUMNS}) VALUES (?, ?, ?, ?, 'pending', {{now}}, NULL, NULL, "
    "NULL, NULL) ON CONFLICT (invocation_id) DO NOTHING"
)
INVOCATION = Statement(f"SELECT {_INVOCATION_COLUMNS} FROM invocations WHERE invocation_id = ?")
# Not those whose run (``FUNCTION_ID/INVOCATION_ID``) a daemon holds under a live lease: it is
# running them, and trying to enter each of them on every look would be a write apiece.
PENDING = Statement(
    f"SELECT {', '.join('i.' + c.strip() for c in _INVOCATION_COLUMNS.split(','))} FROM invocations i "
    "WHERE i.state = 'pending' AND EXISTS (SELECT 1 FROM function_servers f WHERE "
    "f.function_id = i.function_id AND f.owner = ? AND f.expires_at > {now}) "
    "AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = i.function_id || '/' || i.invocation_id "
    "AND r.status = 'running' AND r.lease_expires_at > {now}) "
    "ORDER BY i.created_at, i.invocation_id LIMIT ?"
)
SETTLE = Statement(
    "UPDATE invocations SET state = ?, finished_at = {now}, served_by = ?, output_json = ?, "
    "error_json = ? WHERE invocation_id = ? AND state = 'pending' RETURNING 1"
)


def _server(row: Sequence[Any]) -> FunctionServer:
    return FunctionServer(
        id=row[0],
        event_name=row[1],
        description=row[2],
        schema=None if row[3] is None else json.loads(row[3]),
        owner=row[4],
        expires_at=row[5] / 1000,
    )


def _invocation(row: Sequence[Any]) -> Invocation:
    return Invocation(
        id=row[0],
        function_id=row[1],
        data=json.loads(row[2]),
        caller_run_id=row[3],
        state=row[4],
        created_at=row[5] / 1000,
        finished_at=None if row[6] is None else row[6] / 1000,
        served_by=row[7],
        output_json=row[8],
        error=None if row[9] is None else json.loads(row[9]),
    )


Select = Callable[..., Awaitable[list[Sequence[Any]]]]
"""Runs a read :class:`Statement` with its parameters (and ``now=``) on the journal; its rows."""
Queue = Callable[[Write, Any, Any], "asyncio.Future[Any]"]
"""Queues a write: its kind, key and parameters (for :data:`FUNCTIONS`: a list of
``(statement, params)``, run in order in one batch); resolves to each statement's rows."""


class SQLFunctions:
    """The registry and invocations in the journal's database; writes through its group commit.

    Args:
        select: The journal's read.
        queue: The journal's group commit.
        owner: Who the journal writes as (the daemon these registrations name).
        host_now: The host's clock in epoch ms on a dialect that has none, else ``None``.
        notify: Send wake-ups with ``NOTIFY`` (PostgreSQL); else wake the journals of this
            process on the same file (SQLite).
    """

    def __init__(
        self, select: Select, queue: Queue, owner: str, host_now: Callable[[], int | None], *, notify: bool
    ) -> None:
        self._select = select
        self._queue = queue
        self._owner = owner
        self._now = host_now
        self._notify = notify
        self.wakeups = Wakeups()

    def watch(self, listener: Listener) -> Callable[[], None]:
        return self.wakeups.watch(listener)

    async def _write(
        self, *statements: tuple[Statement, tuple[Any, ...]], wake: tuple[Kind, str] | None = None
    ) -> list[list[Sequence[Any]]]:
        if wake is not None and self._notify:
            statements = (*statements, (NOTIFY, (notice(*wake),)))
        rows: list[list[Sequence[Any]]] = await self._queue(FUNCTIONS, None, (list(statements), self._now()))
        if wake is not None and not self._notify:
            self.wakeups.spread(*wake)
        return rows

    async def register(self, functions: Sequence[ServedFunction], *, ttl: float) -> None:
        ttl_ms = round(ttl * 1000)
        await self._write(
            (FORGET_EXPIRED, ()),
            (UNREGISTER, (self._owner,)),
            *(
                (
                    REGISTER,
                    (
                        function.id,
                        self._owner,
                        function.event_name,
                        function.description,
                        None if function.schema is None else json.dumps(function.schema),
                        ttl_ms,
                    ),
                )
                for function in functions
            ),
        )

    async def unregister(self) -> None:
        await self._write((UNREGISTER, (self._owner,)))

    async def servers(self, function_id: str) -> list[FunctionServer]:
        return [_server(row) for row in await self._select(SERVERS, function_id, now=self._now())]

    async def request(self, invocation: Invocation) -> Invocation:
        data = json.dumps(invocation.data)
        params = (invocation.id, invocation.function_id, data, invocation.caller_run_id)
        await self._write((REQUEST, params), wake=("invoked", invocation.function_id))
        kept = await self.get(invocation.id)
        assert kept is not None  # (written above, or before by the same step)
        return kept

    async def get(self, invocation_id: str) -> Invocation | None:
        found = await self._select(INVOCATION, invocation_id)
        return _invocation(found[0]) if found else None

    async def pending(self, *, limit: int) -> list[Invocation]:
        return [_invocation(row) for row in await self._select(PENDING, self._owner, limit, now=self._now())]

    async def settle(
        self, invocation_id: str, state: InvocationState, *, output_json: str | None, error: ErrorDict | None
    ) -> bool:
        error_json = None if error is None else json.dumps(error)
        params = (state, self._owner, output_json, error_json, invocation_id)
        won = (await self._write((SETTLE, params), wake=("settled", invocation_id)))[0]
        return bool(won)


class NoFunctions:
    """A bridge without a journal shares nothing: it serves no other daemon, and none serve it."""

    def watch(self, listener: Listener) -> Callable[[], None]:
        return lambda: None

    async def register(self, functions: Sequence[ServedFunction], *, ttl: float) -> None:
        return None

    async def unregister(self) -> None:
        return None

    async def servers(self, function_id: str) -> list[FunctionServer]:
        return []

    async def request(self, invocation: Invocation) -> Invocation:
        return invocation

    async def get(self, invocation_id: str) -> Invocation | None:
        return None

    async def pending(self, *, limit: int) -> list[Invocation]:
        return []

    async def settle(
        self, invocation_id: str, state: InvocationState, *, output_json: str | None, error: ErrorDict | None
    ) -> bool:
        return False
