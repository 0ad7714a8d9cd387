"""Recorded calls answered here, without the daemon, when a command runs again.

A command interrupted before it ended (a crash, a deploy) runs again on replay, and the calls
it had made are answered from the journal. Each would still cross the socket, so the daemon
hands the command what it recorded instead: ``TOOLBRIDGE_REPLAY`` names the file, and this
module answers a call found there just as the daemon would (the contract is written down in
the daemon's ``toolbridge/_commands/replay.py``). Any call it does not find, or is unsure of,
goes to the daemon as usual, which then answers it from the journal or runs it.

A call is found when its tool and its input match a record's exactly: the input is built and
spelled as the daemon spells it (canonical JSON: sorted keys, no spaces), so an int is never
taken for a float and two calls match here exactly when the daemon would give them one step
key. The n-th such call takes the n-th record by creating ``taken/<entry>.<n>`` beside the
file (``O_EXCL``: the daemon and any other process of the command take records the same way,
so none is answered twice); those files tell the daemon, when the command ends, which recorded
calls were asked again.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inngest_tools._errors import ToolError

REPLAY_VARIABLE = "TOOLBRIDGE_REPLAY"
FORMAT = 1


def canonical(value: Any) -> str:
    """The daemon's one spelling of a JSON value (``toolbridge._json.canonical``)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":"))


def call_input(positional: bytes, named: bytes) -> str | None:
    """A call's input as the daemon records it and hashes it into the step key.

    ``None`` when it cannot be spelled (a lone surrogate, which the daemon refuses).
    """
    args = json.loads(positional) if positional else []
    kwargs = json.loads(named) if named else {}
    if kwargs and not args:
        value: Any = kwargs
    elif args and not kwargs:
        value = args
    else:
        value = {"args": args, "kwargs": kwargs}
    text = canonical(value)
    try:
        text.encode()
    except UnicodeEncodeError:
        return None
    return text


@dataclass
class _Entry:
    number: int
    records: list[dict[str, Any]]
    next: int = 1  # the occurrence to try first; earlier ones are taken


@dataclass
class Replay:
    """The recorded calls of this command, and what this process has taken of them."""

    directory: Path
    max_calls: int
    max_request_bytes: int
    entries: dict[tuple[str, str], _Entry] = field(default_factory=dict)
    calls: int = 0  # every call this process made, answered here or not

    @classmethod
    def load(cls, path: Path) -> Replay | None:
        """The records file, or ``None`` when it is unreadable or of another format."""
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            if document.get("format") != FORMAT:
                return None
            replay = cls(path.parent, int(document["max_calls"]), int(document["max_request_bytes"]))
            for number, entry in enumerate(document["calls"]):
                key = (str(entry["tool"]), str(entry["input"]))
                replay.entries[key] = _Entry(number, list(entry["records"]))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return replay

    def find(self, name: str, positional: bytes, named: bytes) -> dict[str, Any] | None:
        """The record answering this call, taken for it; ``None``: ask the daemon."""
        self.calls += 1
        if not self.entries or self.calls > self.max_calls:
            return None  # past the budget the daemon answers, and stops the command
        if len(name) + len(positional) + len(named) > self.max_request_bytes:
            return None
        text = call_input(positional, named)
        entry = self.entries.get((name, text)) if text is not None else None
        if entry is None:
            return None
        while entry.next <= len(entry.records):
            occurrence = entry.next
            entry.next += 1
            if self._take(entry.number, occurrence):
                return entry.records[occurrence - 1]
        return None

    def _take(self, number: int, occurrence: int) -> bool:
        try:
            path = self.directory / "taken" / f"{number}.{occurrence}"
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False  # the daemon or another process of the command took it first
        except OSError:
            self.entries.clear()  # cannot take records here: let the daemon answer them all
            return False
        os.close(fd)
        return True


def answer(record: dict[str, Any]) -> Any:
    """The result of a recorded call, or the ``ToolError`` it ended with, raised."""
    error = record.get("error")
    if error is not None:
        raise ToolError(
            str(error.get("message", "")),
            type=str(error.get("type") or "ToolError"),
            retryable=bool(error.get("retryable", False)),
            error_id=str(error.get("error_id", "")),
        )
    return json.loads(record["result_json"])


_loaded: dict[str, Replay | None] = {}


def current() -> Replay | None:
    """This process's replay records (read once), or ``None`` when the command has none."""
    path = os.environ.get(REPLAY_VARIABLE, "")
    if not path:
        return None
    if path not in _loaded:
        _loaded[path] = Replay.load(Path(path))
    return _loaded[path]
