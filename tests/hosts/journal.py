"""What the journal says, read through its own interface (SQLite or PostgreSQL alike)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from toolbridge._journal.base import open_journal


@dataclass(frozen=True)
class Step:
    key: str
    name: str
    status: str
    input: Any
    output: Any
    error: dict[str, Any] | None
    finished_at: float | None


def _json(text: str | None) -> Any:
    return json.loads(text) if text else None


async def tool_steps(location: str, run_id: str) -> dict[str, Step]:
    """The tool steps of ``run_id``, by key."""
    journal = open_journal(location)
    await journal.open()
    try:
        records = await journal.load_steps(run_id)
    finally:
        await journal.close()
    return {
        rec.key: Step(
            rec.key,
            rec.name,
            rec.status,
            _json(rec.input_json),
            _json(rec.output_json),
            rec.error,
            rec.finished_at,
        )
        for rec in records
        if rec.kind == "tool"
    }
