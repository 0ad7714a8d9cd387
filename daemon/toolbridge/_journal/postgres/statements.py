"""What PostgreSQL spells its own way: its clock, the unnest upsert, rows locked ``FOR SHARE``.

Times the database decides (run leases, run start and end) come from its own clock
(:data:`NOW`), so hosts whose clocks disagree still agree on who holds a run.
"""

from __future__ import annotations

import urllib.parse

from toolbridge._journal import rows as r
from toolbridge._journal.statements import STEP_CHANGES, Dialect

__all__ = ["FENCES", "NOW", "POSTGRES", "RETRIES", "UPSERT_STEPS", "redact"]

NOW = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
POSTGRES = Dialect("postgres", numbered=True, clock=NOW, same="IS NOT DISTINCT FROM")
"""Many hosts share one server: leases run on the server's clock, not on any host's."""

RETRIES = 3  # a batch that deadlocks with another daemon's is run again, whole

# One prepared statement whatever the row count: a batch of step snapshots as column arrays.
UPSERT_STEPS = f"""
    INSERT INTO steps ({r.STEP_COLUMNS})
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[],
        $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::int[], $13::text[],
        $14::bigint[], $15::bigint[], $16::int[])
    {STEP_CHANGES}
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
