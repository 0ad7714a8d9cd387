"""A set of step sequence numbers in about one bit each: which recorded steps were asked for.

Steps of a run are numbered from 1 as they are first recorded, so the steps one execution
asks for are numbers in a range, mostly dense. A ``set`` of them costs some 60 bytes each; a
bitmap over the range costs one bit, so a replay of a million recorded steps keeps its
"asked for" marks in 125 kB. A few numbers far apart (a tool group's steps, some recorded
long before the others) stay a small ``set`` until there are :data:`SPARSE_LIMIT` of them.
"""

from __future__ import annotations

__all__ = ["SPARSE_LIMIT", "SeqSet"]

SPARSE_LIMIT = 64
"""Members kept as a plain ``set`` before the set turns into a bitmap."""


class SeqSet:
    """Non-negative integers: a small ``set``, then one bit each over their range."""

    __slots__ = ("_base", "_bits", "_count", "_sparse")

    def __init__(self) -> None:
        self._sparse: set[int] | None = set()
        self._base = 0  # the number of the bitmap's first bit (a multiple of 8)
        self._bits = bytearray()
        self._count = 0

    def add(self, seq: int) -> None:
        if seq < 0:
            raise ValueError(f"a sequence number is not negative, not {seq}")
        sparse = self._sparse
        if sparse is not None:
            sparse.add(seq)
            if len(sparse) >= SPARSE_LIMIT:
                self._sparse = None
                self._base = min(sparse) & ~7
                self._bits = bytearray((max(sparse) - self._base) // 8 + 1)
                for member in sparse:
                    self._set(member)
            return
        if seq < self._base:  # rare: grow the bitmap downwards
            base = seq & ~7
            self._bits[0:0] = bytes((self._base - base) // 8)
            self._base = base
        self._set(seq)

    def _set(self, seq: int) -> None:
        at = seq - self._base
        if at >> 3 >= len(self._bits):
            # Grow by half as much again at least: appending stays amortized constant time.
            self._bits.extend(bytes(max((at >> 3) + 1 - len(self._bits), len(self._bits) // 2)))
        mask = 1 << (at & 7)
        if not self._bits[at >> 3] & mask:
            self._bits[at >> 3] |= mask
            self._count += 1

    def __contains__(self, seq: object) -> bool:
        if self._sparse is not None:
            return seq in self._sparse
        if not isinstance(seq, int):
            return False
        at = seq - self._base
        return at >= 0 and at >> 3 < len(self._bits) and bool(self._bits[at >> 3] & (1 << (at & 7)))

    def __len__(self) -> int:
        return len(self._sparse) if self._sparse is not None else self._count

    @property
    def nbytes(self) -> int:
        """The memory its bitmap takes (none while it is a small set)."""
        return len(self._bits)
