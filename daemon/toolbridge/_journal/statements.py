"""The SQLite journal's statements, apart from the code that runs them.

They stick to what SQLite and PostgreSQL share (``ON CONFLICT ... DO UPDATE``, ``RETURNING``,
integer milliseconds), except where noted.
"""

from __future__ import annotations

from toolbridge._journal import rows as r

ROWS_PER_STATEMENT = 500  # 17 values x 500 rows stays far below SQLite's 32766 parameters

_STEP_CHANGES = """ON CONFLICT (run_id, step_key) DO UPDATE SET
        status = excluded.status, input_json = excluded.input_json,
        output_json = excluded.output_json, error_json = excluded.error_json,
        attempts = excluded.attempts, attempt_log = excluded.attempt_log,
        finished_at = excluded.finished_at, stale = excluded.stale"""
# Fenced in the statement itself: a row is written only while its run's fence is the one this
# journal took (the 17th value); RETURNING names the rows written, so the others are refused.
UPSERT_STEPS = (
    f"INSERT INTO steps ({r.STEP_COLUMNS}) "
    f"SELECT {', '.join(f'column{i}' for i in range(1, 17))} FROM (VALUES",
    f"({', '.join('?' * 17)})",
    f""") AS v WHERE EXISTS (SELECT 1 FROM runs WHERE runs.run_id = v.column1 AND runs.fence = v.column17)
    {_STEP_CHANGES}
    RETURNING run_id, step_key""",
)
# One step alone, fenced the same way (the 17th and 18th values: its run and the fence taken),
# and no rows to name: the count of rows changed (0 or 1) says whether it was written.
UPSERT_STEP = f"""INSERT INTO steps ({r.STEP_COLUMNS}) SELECT {", ".join("?" * 16)}
    WHERE (SELECT fence FROM runs WHERE run_id = ?) = ?
    {_STEP_CHANGES}"""
# Taken when the run is new, already ours, released, or its holder's lease has expired. A new
# holder increases the fence, which refuses the previous holder's late writes.
ENTER_RUN = """
    INSERT INTO runs (run_id, status, started_at, updated_at, owner, lease_expires_at, fence)
    VALUES (?, 'running', ?, ?, ?, ?, 1)
    ON CONFLICT (run_id) DO UPDATE SET
        status = 'running', updated_at = excluded.updated_at, finished_at = NULL, error = NULL,
        entries = runs.entries + 1,
        fence = CASE WHEN runs.owner IS excluded.owner THEN runs.fence ELSE runs.fence + 1 END,
        owner = excluded.owner, lease_expires_at = excluded.lease_expires_at
    WHERE runs.owner IS excluded.owner OR runs.lease_expires_at IS NULL
        OR runs.lease_expires_at <= excluded.updated_at
    RETURNING fence
"""
RENEW_RUN = """UPDATE runs SET lease_expires_at = ?
    WHERE run_id = ? AND owner = ? AND fence = ? AND lease_expires_at IS NOT NULL RETURNING 1"""
RELEASE_RUN = "UPDATE runs SET lease_expires_at = NULL WHERE run_id = ? AND owner = ? AND fence = ?"
RELEASE_ALL = "UPDATE runs SET lease_expires_at = NULL WHERE owner = ? AND lease_expires_at IS NOT NULL"
END_RUN = """UPDATE runs SET status = ?, updated_at = ?, finished_at = ?, error = ?
    WHERE run_id = ? AND fence = ? RETURNING 1"""
RECORD_EVENT = "INSERT INTO events (event_id, name, data_json, ts) VALUES (?, ?, ?, ?)"
INSERT_TOKEN = f"""INSERT INTO sidecar_tokens ({r.TOKEN_COLUMNS}, secret_hash)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"""
REVOKE_TOKEN = """UPDATE sidecar_tokens SET revoked_at = ?
    WHERE token_id = ? AND revoked_at IS NULL RETURNING 1"""
# The budget is counted where it is kept: a call is allowed only if this very update finds
# the token under its budget, so two daemons serving one token never overspend it.
COUNT_CALL = """UPDATE sidecar_tokens SET calls = calls + 1
    WHERE token_id = ? AND calls < max_calls RETURNING 1"""
