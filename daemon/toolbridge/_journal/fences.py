"""The fence a journal took for each run it holds, and for the runs it left lately.

A write is allowed only under the fence its journal took when it entered the run, so each
journal remembers that fence. It remembers it a while after leaving, too: a late write of a
run this journal left and nobody has taken since is harmless and still allowed, and one of a
run taken over since is refused for what it is (the lease lost). Remembering every run ever
left grew a long-lived daemon's memory by a dict entry per run (about 140 bytes), so only the
last :data:`LEFT_REMEMBERED` are kept; a write of a run left longer ago is refused as a write
of a run never entered.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["LEFT_REMEMBERED", "Fences"]

LEFT_REMEMBERED = 1024
"""How many runs left lately keep their fence (a late write of one is still judged by it)."""


class Fences:
    """Run id -> the fence taken: every run held, and the last ``remember`` left."""

    def __init__(self, remember: int | None = None) -> None:
        self._remember = LEFT_REMEMBERED if remember is None else remember
        self._held: dict[str, int] = {}
        self._left: OrderedDict[str, int] = OrderedDict()

    def take(self, run_id: str, fence: int) -> None:
        """This journal entered ``run_id`` under ``fence``."""
        self._left.pop(run_id, None)
        self._held[run_id] = fence

    def get(self, run_id: str) -> int | None:
        """The fence of a run held or left lately; ``None`` for any other."""
        fence = self._held.get(run_id)
        return self._left.get(run_id) if fence is None else fence

    def leave(self, run_id: str) -> None:
        """This journal released ``run_id``: its fence is kept among the runs left lately."""
        fence = self._held.pop(run_id, None)
        if fence is None:
            return
        self._left[run_id] = fence
        if len(self._left) > self._remember:
            self._left.popitem(last=False)

    @property
    def holding(self) -> bool:
        """Whether any run is held (not left)."""
        return bool(self._held)

    def __len__(self) -> int:
        """Runs remembered, held or left."""
        return len(self._held) + len(self._left)

    def snapshot(self) -> tuple[dict[str, int], OrderedDict[str, int]]:
        """What :meth:`restore` puts back (a transaction that rolls back took no fences)."""
        return dict(self._held), OrderedDict(self._left)

    def restore(self, snapshot: tuple[dict[str, int], OrderedDict[str, int]]) -> None:
        """Adopt a :meth:`snapshot` (its copies are its own: no second copy is needed)."""
        self._held, self._left = snapshot
