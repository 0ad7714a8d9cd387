"""What PostgreSQL spells its own way: its clock, the unnest upsert, rows locked ``FOR SHARE``.

Times the database decides (run leases, run start and end) come from its own clock
(:data:`NOW`), so hosts whose clocks disagree still agree on who holds a run.
"""

from __future__ import annotations

import urllib.parse

from toolbridge._journal import rows as r
from toolbridge._journal.statements import STEP_CHANGES, Dialect

__all__ = ["FENCES", "NOW", "POSTGRES", "RETRIES", "UPSERT_STEP", "UPSERT_STEPS", "redact"]

NOW = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
POSTGRES = Dialect("postgres", numbered=True, clock=NOW, same="IS NOT DISTINCT FROM")
"""Many hosts share one server: leases run on the server's clock, not on any host's."""

RETRIES = 3  # a batch that deadlocks with another daemon's is run again, whole

_STEP_ARRAYS = (
    "$1::text[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::text[], $8::text[], "
    "$9::text[], $10::text[], $11::text[], $12::int[], $13::text[], $14::bigint[], $15::bigint[], "
    "$16::int[], $17::bigint[]"
)
_STEP_VALUES = ", ".join(f"u.{column.strip()}" for column in r.STEP_COLUMNS.split(","))
# A batch of step snapshots, fenced, in one statement and one round trip (its own transaction
# when the batch holds nothing else): one prepared statement whatever the row count, the rows
# as column arrays, and the fence each row's journal took as a 17th. ``held`` reads the runs'
# rows FOR SHARE, so a takeover (which updates the row) waits for this statement's transaction
# to commit; a row is written only while its run's fence is the one taken. The statement
# returns the fences it read: the caller refuses the rows they do not match.
UPSERT_STEPS = f"""
    WITH held AS (
        SELECT run_id, owner, fence FROM runs WHERE run_id = ANY($1::text[]) ORDER BY run_id FOR SHARE
    ), written AS (
        INSERT INTO steps ({r.STEP_COLUMNS})
        SELECT {_STEP_VALUES}
        FROM unnest({_STEP_ARRAYS}) AS u ({r.STEP_COLUMNS}, taken)
        JOIN held ON held.run_id = u.run_id AND held.fence = u.taken
        {STEP_CHANGES}
    )
    SELECT run_id, owner, fence FROM held
"""
_STEP_TYPES = "text text text int text text text text text text text int text bigint bigint int".split()  # noqa: SIM905
# One step alone (a call's outcome: the write on every call's path), fenced the same way with
# scalar parameters: no arrays to build, send and unnest. The same result rows.
UPSERT_STEP = f"""
    WITH held AS (
        SELECT run_id, owner, fence FROM runs WHERE run_id = $1::text FOR SHARE
    ), written AS (
        INSERT INTO steps ({r.STEP_COLUMNS})
        SELECT {", ".join(f"${n}::{kind}" for n, kind in enumerate(_STEP_TYPES, start=1))}
        FROM held WHERE held.fence = $17::bigint
        {STEP_CHANGES}
    )
    SELECT run_id, owner, fence FROM held
"""
# A takeover updates the run's row, so it waits for a batch holding the row FOR SHARE to
# commit; a batch that starts after a takeover sees the new fence.
FENCES = "SELECT run_id, owner, fence FROM runs WHERE run_id = ANY($1::text[]) ORDER BY run_id FOR SHARE"


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
