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
    output: Any
    error: dict[str, Any] | None


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
            rec.key, rec.name, rec.status, json.loads(rec.output_json) if rec.output_json else None, rec.error
        )
        for rec in records
        if rec.kind == "tool"
    }
