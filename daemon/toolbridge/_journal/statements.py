"""The journal's SQL, written once for both dialects, as typed objects.

A :class:`Statement` is written with ``?`` for each parameter, ``{now}`` where the clock
decides a time and ``{same}`` for a null-safe comparison; a :class:`Dialect` renders it:
SQLite keeps the ``?`` and takes the host's clock as one more parameter, PostgreSQL numbers
the parameters (``$1``, ``$2``, ...) and reads its own clock, so hosts whose clocks disagree
still agree on who holds a run. What truly differs (DDL types, the multi-row upsert, row
locking, notifications) lives in the dialect packages, ``sqlite/`` and ``postgres/``.

A :class:`Write` names one kind of queued write: the group commit batches writes of a kind
together, and the journal runs each kind with its own operation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolbridge._journal import rows as r

__all__ = ["Dialect", "Statement", "Write"]


@dataclass(frozen=True)
class Dialect:
    """How one database spells what the statements leave open.

    Attributes:
        name: ``"sqlite"`` or ``"postgres"``.
        numbered: Parameters are ``$1, $2, ...`` rather than ``?``.
        clock: The database's clock in SQL (integer epoch milliseconds), or ``None`` where
            the host's clock is passed as a parameter instead.
        same: The null-safe equality operator.
    """

    name: str
    numbered: bool
    clock: str | None
    same: str


_MARKS = re.compile(r"(\?|\{now\}|\{same\})")


class Statement:
    """One SQL statement, as both dialects run it (rendered once per dialect, then cached)."""

    __slots__ = ("_clock_at", "_rendered", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        params = [mark for mark in _MARKS.findall(text) if mark != "{same}"]
        self._clock_at = tuple(index for index, mark in enumerate(params) if mark == "{now}")
        self._rendered: dict[Dialect, str] = {}

    def __repr__(self) -> str:
        return f"Statement({' '.join(self.text.split())[:60]!r})"

    def sql(self, dialect: Dialect) -> str:
        """The statement as ``dialect`` runs it."""
        rendered = self._rendered.get(dialect)
        if rendered is None:
            rendered = self._rendered[dialect] = _render(self.text, dialect)
        return rendered

    def bind(self, dialect: Dialect, params: Sequence[Any], now: int | None = None) -> tuple[Any, ...]:
        """The parameters as ``dialect`` takes them: the host's clock (``now``, epoch ms) put
        where the statement reads the clock, on a dialect without a clock of its own."""
        if not self._clock_at or dialect.clock is not None:
            return tuple(params)
        if now is None:
            raise ValueError(f"{self!r} reads the clock: pass now=")
        given = iter(params)
        return tuple(
            now if index in self._clock_at else next(given)
            for index in range(len(params) + len(self._clock_at))
        )


def _render(text: str, dialect: Dialect) -> str:
    number = 0

    def mark(found: re.Match[str]) -> str:
        nonlocal number
        if found.group() == "{same}":
            return dialect.same
        if found.group() == "{now}" and dialect.clock is not None:
            return dialect.clock
        number += 1
        return f"${number}" if dialect.numbered else "?"

    return _MARKS.sub(mark, text)


@dataclass(frozen=True, eq=False)
class Write:
    """One kind of queued write (compared by identity: each is a module constant below)."""

    name: str

    def __repr__(self) -> str:
        return f"Write({self.name})"


ENTER = Write("enter")
STEP = Write("step")
RENEW = Write("renew")
RELEASE = Write("release")
END = Write("end")
EVENT = Write("event")
TOKEN = Write("token")
REVOKE = Write("revoke")
CALL = Write("call")
APPROVAL = Write("approval")
DECIDE = Write("decide")
CANCEL = Write("cancel")
FUNCTIONS = Write("functions")  # the registry of served functions and invocations (functions.py)

# -- runs and their leases -------------------------------------------------------------------

# Taken when the run is new, already ours, released, or its holder's lease has expired. A new
# holder increases the fence, which refuses the previous holder's late writes.
ENTER_RUN = Statement("""
    INSERT INTO runs (run_id, status, started_at, updated_at, owner, lease_expires_at, fence)
    VALUES (?, 'running', {now}, {now}, ?, {now} + ?, 1)
    ON CONFLICT (run_id) DO UPDATE SET
        status = 'running', updated_at = excluded.updated_at, finished_at = NULL, error = NULL,
        entries = runs.entries + 1,
        fence = CASE WHEN runs.owner {same} excluded.owner THEN runs.fence ELSE runs.fence + 1 END,
        owner = excluded.owner, lease_expires_at = excluded.lease_expires_at
    WHERE runs.owner {same} excluded.owner OR runs.lease_expires_at IS NULL
        OR runs.lease_expires_at <= excluded.updated_at
    RETURNING fence
""")
RUN_HOLDER = Statement("SELECT owner, lease_expires_at FROM runs WHERE run_id = ?")
# Taken from a holder known dead (see holders.py) although its lease is live: still only from
# that holder, so two daemons finding it dead at once do not both take it.
TAKE_OVER = Statement("""UPDATE runs SET status = 'running', updated_at = {now}, finished_at = NULL,
        error = NULL, entries = entries + 1, fence = fence + 1, owner = ?, lease_expires_at = {now} + ?
    WHERE run_id = ? AND owner = ? RETURNING fence""")
RENEW_RUN = Statement("""UPDATE runs SET lease_expires_at = {now} + ?
    WHERE run_id = ? AND owner = ? AND fence = ? AND lease_expires_at IS NOT NULL RETURNING 1""")
RELEASE_RUN = Statement(
    "UPDATE runs SET lease_expires_at = NULL WHERE run_id = ? AND owner = ? AND fence = ?"
)
RELEASE_ALL = Statement(
    "UPDATE runs SET lease_expires_at = NULL WHERE owner = ? AND lease_expires_at IS NOT NULL"
)
END_RUN = Statement("""UPDATE runs SET status = ?, updated_at = {now}, finished_at = {now}, error = ?
    WHERE run_id = ? AND fence = ?""")

_RUNS = f"SELECT {r.RUN_COLUMNS} FROM runs r"
RUNS_NEWEST = Statement(f"{_RUNS} ORDER BY r.started_at DESC LIMIT ?")
RUN_BY_ID = Statement(f"{_RUNS} WHERE r.run_id = ?")
RUNS_ORPHANED = Statement(
    f"{_RUNS} WHERE r.status = 'running' AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= {{now}}) "
    "ORDER BY r.started_at LIMIT ?"
)

# -- steps -----------------------------------------------------------------------------------

STEP_CHANGES = """ON CONFLICT (run_id, step_key) DO UPDATE SET
        status = excluded.status, input_json = excluded.input_json,
        output_json = excluded.output_json, error_json = excluded.error_json,
        attempts = excluded.attempts, attempt_log = excluded.attempt_log,
        finished_at = excluded.finished_at, stale = excluded.stale"""
"""What a step's later snapshot changes (both dialects' multi-row upserts end with it)."""

# -- events and sidecar tokens ---------------------------------------------------------------

RECORD_EVENT = Statement("INSERT INTO events (event_id, name, data_json, ts) VALUES (?, ?, ?, ?)")
EVENTS_SINCE = Statement(
    "SELECT event_id, name, data_json, ts FROM events WHERE name = ? AND ts >= ? ORDER BY ts"
)
EVENT_BY_ID = Statement("SELECT event_id, name, data_json, ts FROM events WHERE event_id = ?")

INSERT_TOKEN = Statement(
    f"INSERT INTO sidecar_tokens ({r.TOKEN_COLUMNS}, secret_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
TOKEN_BY_ID = Statement(f"SELECT {r.TOKEN_COLUMNS}, secret_hash FROM sidecar_tokens WHERE token_id = ?")
TOKENS_NEWEST = Statement(f"SELECT {r.TOKEN_COLUMNS} FROM sidecar_tokens ORDER BY created_at DESC")
REVOKE_TOKEN = Statement(
    "UPDATE sidecar_tokens SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL RETURNING 1"
)
# The budget is counted where it is kept: a call is allowed only if this very update finds
# the token under its budget, so daemons serving one token never overspend it together.
COUNT_CALL = Statement(
    "UPDATE sidecar_tokens SET calls = calls + 1 WHERE token_id = ? AND calls < max_calls RETURNING 1"
)
