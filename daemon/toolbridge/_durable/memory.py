"""A run's state: one mapping shared by the tools of a run (``ctx.state``) and its host (``step.state``).

AgentKit's ``network.state``, made durable. The rules:

- **Journaled with the step that made the change.** When a step reaches its outcome, the keys
  changed since it started (by it, or by anything running beside it) are added to its
  ``attempt_log`` as ``{"state": {key: {"value": v, "version": n}}, "version": n}``: no journal
  change, and the trace and the web view read it from there. In-place changes
  (``ctx.state["files"].append(...)``) count too: a step's outcome compares each value with
  what was last recorded.
- **Restored on replay, as it was at each step.** A step answered from the journal applies its
  recorded changes when it is claimed, so code after it reads what code after it read the
  first time. A completed command is not run again; its own entry holds every change its
  calls made.
- **Parallel writes: the later write wins.** Every write takes the next number of the run
  (``version``); a replayed change is applied only over an older one, so two steps that ran
  at the same time and wrote the same key leave the value written last, whatever order
  they replay in.
- **Values are JSON data**, checked when they are set.

Host code's own writes outside any step are not journaled: the host's code runs again on
replay and makes them again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

from toolbridge._json import dumps
from toolbridge._records import StepRecord

__all__ = ["RunMemory"]

_DELETED = object()


class RunMemory(MutableMapping[str, Any]):
    """The run's state: a mapping whose changes are numbered, recorded and replayed."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._versions: dict[str, int] = {}  # key -> the number of its last write (deletes too)
        self._recorded: dict[str, str] = {}  # key -> its value's JSON when last numbered
        self.version = 0

    # -- the mapping ----------------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError(f"run state keys are strings, not {key!r}")
        try:
            text = dumps(value)
        except Exception as exc:
            raise TypeError(f"run state values must be JSON data; {key!r} = {value!r} is not") from exc
        self._values[key] = value
        self._bump(key, text)

    def __delitem__(self, key: str) -> None:
        del self._values[key]
        self._bump(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"RunMemory({self._values!r})"

    def _bump(self, key: str, text: str | None) -> None:
        self.version += 1
        self._versions[key] = self.version
        if text is None:
            self._recorded.pop(key, None)
        else:
            self._recorded[key] = text

    # -- recording and replay -------------------------------------------------------------

    def recorder(self) -> Callable[[StepRecord], None]:
        """What a step calls at its outcome (``StepRecord.on_done``): records what changed since now."""
        mark = self.version

        def record(rec: StepRecord) -> None:
            changes = self.changes_since(mark)
            if changes:
                rec.attempt_log.append({"state": changes, "version": self.version})

        return record

    def changes_since(self, mark: int) -> dict[str, dict[str, Any]]:
        """The keys written after write number ``mark``, with their values and numbers."""
        if not self._versions:
            return {}
        self._notice_in_place_changes()
        changes: dict[str, dict[str, Any]] = {}
        for key, version in self._versions.items():
            if version > mark:
                if key in self._values:
                    changes[key] = {"value": self._values[key], "version": version}
                else:
                    changes[key] = {"deleted": True, "version": version}
        return changes

    def _notice_in_place_changes(self) -> None:
        for key, value in self._values.items():
            try:
                text = dumps(value)
            except Exception:
                continue  # made unserializable in place: the last good value stays recorded
            if self._recorded.get(key) != text:
                self._bump(key, text)

    def replay(self, rec: StepRecord) -> None:
        """Apply the changes a finished step recorded (a step answered from the journal)."""
        for entry in rec.attempt_log:
            changes = entry.get("state") if isinstance(entry, dict) else None
            if not isinstance(changes, dict):
                continue
            for key, change in changes.items():
                version = int(change.get("version", 0))
                if version <= self._versions.get(key, 0):
                    continue  # a later write already applied
                if change.get("deleted"):
                    self._values.pop(key, None)
                    self._recorded.pop(key, None)
                else:
                    self._values[key] = change.get("value")
                    self._recorded[key] = dumps(change.get("value"))
                self._versions[key] = version
                self.version = max(self.version, version)
            self.version = max(self.version, int(entry.get("version", 0)))
