"""The PostgreSQL journal's statements (:mod:`.postgres` runs them).

Times the database decides (run leases, run start and end) come from its own clock
(``NOW``), so hosts whose clocks disagree still agree on who holds a run.
"""

from __future__ import annotations

import urllib.parse

from toolbridge._journal import rows as r

NOW = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
RETRIES = 3  # a batch that deadlocks with another daemon's is run again, whole

UPSERT_STEPS = f"""
    INSERT INTO steps ({r.STEP_COLUMNS})
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[],
        $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::int[], $13::text[],
        $14::bigint[], $15::bigint[], $16::int[])
    ON CONFLICT (run_id, step_key) DO UPDATE SET
        status = excluded.status, input_json = excluded.input_json,
        output_json = excluded.output_json, error_json = excluded.error_json,
        attempts = excluded.attempts, attempt_log = excluded.attempt_log,
        finished_at = excluded.finished_at, stale = excluded.stale
"""
ENTER_RUN = f"""
    INSERT INTO runs (run_id, status, started_at, updated_at, owner, lease_expires_at, fence)
    VALUES ($1, 'running', {NOW}, {NOW}, $2, {NOW} + $3, 1)
    ON CONFLICT (run_id) DO UPDATE SET
        status = 'running', updated_at = excluded.updated_at, finished_at = NULL, error = NULL,
        entries = runs.entries + 1,
        fence = CASE WHEN runs.owner IS NOT DISTINCT FROM excluded.owner
            THEN runs.fence ELSE runs.fence + 1 END,
        owner = excluded.owner, lease_expires_at = excluded.lease_expires_at
    WHERE runs.owner IS NOT DISTINCT FROM excluded.owner OR runs.lease_expires_at IS NULL
        OR runs.lease_expires_at <= excluded.updated_at
    RETURNING fence
"""
FENCES = "SELECT run_id, owner, fence FROM runs WHERE run_id = ANY($1::text[]) ORDER BY run_id FOR SHARE"
RENEW_RUN = f"""UPDATE runs SET lease_expires_at = {NOW} + $2
    WHERE run_id = $1 AND owner = $3 AND fence = $4 AND lease_expires_at IS NOT NULL RETURNING 1"""
RELEASE_RUN = "UPDATE runs SET lease_expires_at = NULL WHERE run_id = $1 AND owner = $2 AND fence = $3"
RELEASE_ALL = "UPDATE runs SET lease_expires_at = NULL WHERE owner = $1 AND lease_expires_at IS NOT NULL"
END_RUN = f"""UPDATE runs SET status = $1, updated_at = {NOW}, finished_at = {NOW}, error = $2
    WHERE run_id = $3 AND fence = $4"""
RECORD_EVENT = "INSERT INTO events (event_id, name, data_json, ts) VALUES ($1, $2, $3, $4)"
INSERT_TOKEN = (
    f"INSERT INTO sidecar_tokens ({r.TOKEN_COLUMNS}, secret_hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
)
REVOKE_TOKEN = (
    "UPDATE sidecar_tokens SET revoked_at = $1 WHERE token_id = $2 AND revoked_at IS NULL RETURNING 1"
)
# The budget is counted where it is kept: a call is allowed only if this very update finds
# the token under its budget, so daemons serving one token never overspend it together.
COUNT_CALL = (
    "UPDATE sidecar_tokens SET calls = calls + 1 WHERE token_id = $1 AND calls < max_calls RETURNING 1"
)
RUN_SELECT = f"SELECT {r.RUN_COLUMNS} FROM runs r"


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
