"""Client-side replay: a re-run command's recorded calls answered inside the sandbox.

When an interrupted command runs again, each call it makes again would cross the socket only
to be answered from the journal. Instead the daemon hands the command what it recorded, and
the client answers those calls itself; only new calls (and calls the journal cannot answer)
reach the daemon.

The contract, which both clients implement (``inngest_tools/_replay.py``, ``lib/replay.js``):

- ``TOOLBRIDGE_REPLAY`` names ``records.json`` in a directory of the command's own, which it
  may write (``taken/`` inside it). The file holds ``{"format": 1, "max_calls": N,
  "max_request_bytes": N, "calls": [{"tool": name, "input": canonical JSON text, "records":
  [{"key": step key, "result_json": text} | {"key": ..., "error": {type, message, retryable,
  error_id}}, ...]}, ...]}``: for each recorded (tool, input), the outcomes of its first
  occurrences, in order, as far as every one is done (a call interrupted while running is
  not given, nor any after it: the daemon runs or answers those).
- A call matches an entry when its tool is the entry's and its input, built as the daemon
  builds it (positional list, named object, or ``{"args", "kwargs"}``), is equal to the
  entry's as JSON values: same types (an int is not a float, a bool is not an int), same
  numbers, strings, keys. To answer it, the client takes the entry's next occurrence by
  creating ``taken/<entry>.<occurrence>`` with ``O_CREAT | O_EXCL``: whoever creates the
  file owns that occurrence. The daemon takes occurrences the same way for the calls that do
  reach it, so two processes of one command, or a process and the daemon, never answer one
  recorded occurrence twice, and the n-th call of a (tool, input) meets the n-th record.
- A client may always send a call to the daemon instead (an old client, a call it is unsure
  of, a command past its ``max_calls``): the daemon then takes the next free occurrence and
  answers it from the journal, as before.
- When the command ends, the files in ``taken/`` tell the daemon which recorded calls were
  asked again: they are claimed (so not marked stale, not in ``not_asked_again``) and shown
  replayed in the trace.

A sandbox sees only its own command's recorded results, which it was given when they were
made; what it writes in ``taken/`` can only change which of its own records count as asked.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolbridge._calls.scope import CommandScope
from toolbridge._calls.secrets import SEALED
from toolbridge._durable.keycounter import KeyCounter
from toolbridge._durable.runstate import PAGE, RunState
from toolbridge._options import ToolOptions
from toolbridge._records import StepRecord
from toolbridge._telemetry import tracing

__all__ = ["REPLAY_VARIABLE", "ClientReplay"]

REPLAY_VARIABLE = "TOOLBRIDGE_REPLAY"
FORMAT = 1
_CALL_KEY = re.compile(r"(?P<base>[A-Za-z][A-Za-z0-9_-]*@[0-9a-f]+)(?:#(?P<occurrence>[0-9]+))?")
_TAKEN = re.compile(r"(?P<entry>[0-9]+)\.(?P<occurrence>[0-9]+)")
MEMORY_DIR = Path("/dev/shm")
"""Where the records go when it is there: taking a record creates a file, which costs about
15 us on tmpfs and up to 20 times that on a busy disk's journaling file system."""


def _scratch_parent() -> Path | None:
    """A memory-backed directory for the records when there is one, else the temp directory."""
    return MEMORY_DIR if MEMORY_DIR.is_dir() and os.access(MEMORY_DIR, os.W_OK | os.X_OK) else None


@dataclass
class _Entry:
    base: str  # the step key of the first occurrence
    records: list[StepRecord]  # occurrence n is records[n - 1]


async def _recorded(run: RunState) -> AsyncIterator[StepRecord]:
    """The run's recorded steps, a page at a time from the journal (a run may hold millions)."""
    after = 0
    while page := await run.journal.load_steps(run.run_id, after=after, limit=PAGE):
        for rec in page:
            yield run.record(rec.key) or rec  # the one in memory is the newer
        after = page[-1].seq


async def _entries(run: RunState, command_key: str, tools: set[str]) -> list[_Entry]:
    """The recorded calls of ``command_key`` to hand out: per base key, its done prefix."""
    by_base: dict[str, dict[int, StepRecord]] = {}
    prefix = f"{command_key}/"
    async for rec in _recorded(run):
        if rec.parent_key != command_key or rec.kind != "tool" or not rec.key.startswith(prefix):
            continue
        match = _CALL_KEY.fullmatch(rec.key[len(prefix) :])
        if match is None or rec.name not in tools or rec.input_json is None:
            continue
        occurrence = int(match["occurrence"] or 1)
        by_base.setdefault(f"{prefix}{match['base']}", {})[occurrence] = rec
    entries = []
    for base, occurrences in by_base.items():
        records: list[StepRecord] = []
        while (next_rec := occurrences.get(len(records) + 1)) is not None and _answerable(next_rec):
            records.append(next_rec)
        if records:
            entries.append(_Entry(base, records))
    return entries


def _answerable(rec: StepRecord) -> bool:
    # A sealed secret is never written to the records file: the daemon answers that call,
    # opening the seal in memory.
    return rec.done and SEALED not in (rec.output_json or "")


def _answer(rec: StepRecord) -> dict[str, Any]:
    if rec.status == "completed":
        return {"key": rec.key, "result_json": rec.output_json or "null"}
    error = rec.error or {}
    return {
        "key": rec.key,
        "error": {
            "type": str(error.get("type") or "ToolError"),
            "message": str(error.get("message", "")),
            "retryable": bool(error.get("retryable", False)),
            "error_id": str(error.get("error_id", "")),
        },
    }


class _ReplayKeys(KeyCounter):
    """Step keys for the calls that reach the daemon, taking recorded occurrences as clients do."""

    def __init__(self, replay: ClientReplay, run: RunState) -> None:
        super().__init__(run)
        self._replay = replay
        self._next: dict[str, int] = {}

    async def key(self, base: str) -> str:
        index = self._replay.index.get(base)
        if index is None:
            return await super().key(base)
        entry = self._replay.entries[index]
        occurrence = self._next.get(base, 1)
        # A recorded occurrence is the daemon's only if no client took it first.
        while occurrence <= len(entry.records) and not self._replay.take(index, occurrence):
            occurrence += 1
        self._next[base] = occurrence + 1
        return base if occurrence == 1 else f"{base}#{occurrence}"


@dataclass
class ClientReplay:
    """The recorded calls one command execution hands to its sandbox, and what came of them."""

    directory: Path
    entries: list[_Entry]
    index: dict[str, int] = field(default_factory=dict)  # base key -> entry number
    taken_here: set[str] = field(default_factory=set)  # occurrences the daemon took itself

    @classmethod
    async def prepare(
        cls, run: RunState, command_key: str, tools: set[str], options: ToolOptions
    ) -> ClientReplay | None:
        """Write the records file for a command about to run again; ``None`` if nothing to hand out."""
        entries = await _entries(run, command_key, tools)
        if not entries:
            return None
        directory = Path(tempfile.mkdtemp(prefix="toolbridge-replay-", dir=_scratch_parent()))
        (directory / "taken").mkdir()
        calls = [
            {
                "tool": entry.records[0].name,
                "input": entry.records[0].input_json,
                "records": [_answer(r) for r in entry.records],
            }
            for entry in entries
        ]
        document = {
            "format": FORMAT,
            "max_calls": options.max_calls,
            "max_request_bytes": options.max_request_bytes,
            "calls": calls,
        }
        records = directory / "records.json"
        records.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
        records.chmod(0o444)
        replay = cls(directory, entries)
        replay.index = {entry.base: number for number, entry in enumerate(entries)}
        return replay

    @property
    def environment(self) -> dict[str, str]:
        return {REPLAY_VARIABLE: str(self.directory / "records.json")}

    @property
    def writable_paths(self) -> list[Path]:
        """Lent to the sandbox user (under bubblewrap): the directory (private to it and the
        daemon, 0700) and ``taken/`` in it. Only the command's own records are there."""
        return [self.directory, self.directory / "taken"]

    @property
    def handed_out(self) -> int:
        return sum(len(entry.records) for entry in self.entries)

    def keys(self, run: RunState) -> KeyCounter:
        return _ReplayKeys(self, run)

    def take(self, index: int, occurrence: int) -> bool:
        """Take a recorded occurrence for the daemon; False if a client took it first."""
        name = f"{index}.{occurrence}"
        try:
            os.close(os.open(self.directory / "taken" / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            return False
        self.taken_here.add(name)
        return True

    def answered_in_sandbox(self) -> list[StepRecord]:
        """The recorded calls the sandbox answered itself, in the order they were recorded."""
        answered = []
        with contextlib.suppress(OSError), os.scandir(self.directory / "taken") as names:
            for item in names:
                match = _TAKEN.fullmatch(item.name)
                if match is None or item.name in self.taken_here:
                    continue
                index, occurrence = int(match["entry"]), int(match["occurrence"])
                if index < len(self.entries) and 1 <= occurrence <= len(self.entries[index].records):
                    answered.append(self.entries[index].records[occurrence - 1])
        return sorted(answered, key=lambda rec: rec.seq)

    async def count_call(self, scope: CommandScope) -> bool:
        """The call budget, counting the calls answered in the sandbox so far."""
        if scope.calls + self.handed_out <= scope.options.max_calls:
            return True  # within budget whatever the sandbox answered: no need to look
        return scope.calls + len(self.answered_in_sandbox()) <= scope.options.max_calls

    async def finish(self, run: RunState, scope: CommandScope) -> None:
        """Tell the run which recorded calls were asked again in the sandbox (before its span ends)."""
        for rec in self.answered_in_sandbox():
            await run.claim(rec.key)
            tracing.replayed(rec, scope.trace_context)

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
