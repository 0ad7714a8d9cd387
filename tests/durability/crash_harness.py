"""Runs crash_host.py as a real process, kills it at failpoints, and checks the journal's promises."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CRASH_HOST = Path(__file__).with_name("crash_host.py")
TAGS = {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 7, "g": 7, "h": 6}
HOST_TIMEOUT = 120.0


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class CrashHarness:
    """One journal and work dir, entered again and again by a host that may die."""

    work: Path
    at_most_once: bool = False
    run_id: str = "crash-run"
    entries: int = 0
    # After each crash: the steps the journal held as completed, with how often each had run.
    completed_before: list[dict[str, int]] = field(default_factory=list)

    @property
    def journal(self) -> Path:
        return self.work / "journal.db"

    async def enter(self, failpoints: str = "") -> int:
        """Run the host once; returns its exit status (-9 when a failpoint killed it)."""
        self.entries += 1
        argv = [
            sys.executable,
            str(CRASH_HOST),
            str(self.journal),
            self.run_id,
            str(self.work),
            str(self.entries),
        ]
        if self.at_most_once:
            argv.append("--at-most-once")
        env = {**os.environ, "TOOLBRIDGE_FAILPOINTS": failpoints}
        process = await asyncio.create_subprocess_exec(*argv, env=env, stderr=asyncio.subprocess.PIPE)
        _, stderr = await asyncio.wait_for(process.communicate(), HOST_TIMEOUT)
        assert process.returncode in (0, -signal.SIGKILL), stderr.decode()
        if process.returncode != 0:
            self.check_after_crash()
        return process.returncode

    def steps(self) -> dict[str, sqlite3.Row]:
        with sqlite3.connect(self.journal) as db:
            db.row_factory = sqlite3.Row
            rows = db.execute("SELECT * FROM steps WHERE kind = 'tool'").fetchall()
        return {row["step_key"]: row for row in rows}

    def received(self, entry: int) -> list[dict[str, Any]]:
        return _lines(self.work / f"received-{entry}.jsonl")

    def invocations(self) -> list[dict[str, Any]]:
        return _lines(self.work / "invocations.jsonl")

    def check_after_crash(self) -> None:
        """The journal is intact and holds every result the sandbox received."""
        with sqlite3.connect(self.journal) as db:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        by_idempotency_key = {row["idempotency_key"]: row for row in self.steps().values()}
        for record in self.received(self.entries):
            if "value" not in record:
                continue
            step = by_idempotency_key[record["value"]["receipt"]]
            assert step["status"] == "completed", step["step_key"]
            assert json.loads(step["output_json"]) == record["value"]
        ran = Counter(invocation["step_key"] for invocation in self.invocations())
        self.completed_before.append(
            {key: ran[key] for key, row in self.steps().items() if row["status"] == "completed"}
        )

    def check_final(self) -> dict[str, dict[str, Any]]:
        """After a clean entry: every call answered, nothing ran twice that had completed,
        every re-run used the same idempotency key. Returns the final answers by tag."""
        final = {record["tag"]: record for record in self.received(self.entries)}
        assert set(final) == set(TAGS)
        steps = self.steps()
        invocations = self.invocations()
        per_step = Counter(invocation["step_key"] for invocation in invocations)
        for invocation in invocations:
            step = steps[invocation["step_key"]]
            assert invocation["idempotency_key"] == step["idempotency_key"]
        for completed in self.completed_before:
            for key, ran_by_then in completed.items():
                assert per_step[key] == ran_by_then, f"{key} ran again after it was recorded as completed"
        if self.at_most_once:
            assert all(count <= 1 for count in per_step.values()), per_step
        with sqlite3.connect(self.journal) as db:
            status, lease, fence = db.execute(
                "SELECT status, lease_expires_at, fence FROM runs WHERE run_id = ?", (self.run_id,)
            ).fetchone()
        # Every entry held the run in turn (a new host, a new fence), and the last let it go.
        assert (status, lease, fence) == ("completed", None, self.entries)
        for tag, record in final.items():
            if "value" in record:
                assert record["value"]["charged"] == TAGS[tag]
            else:
                assert self.at_most_once
                assert record["error"] == "StepInterrupted", record
        # Answers received before a crash are answered the same way on replay.
        for entry in range(1, self.entries):
            for record in self.received(entry):
                if "value" in record and record["tag"] not in ("f", "g"):
                    assert final[record["tag"]] == record
        return final
