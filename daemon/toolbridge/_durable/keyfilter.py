"""Which step keys a run may have recorded, in a few bytes per key: a scalable Bloom filter.

A run of a million calls cannot keep a million records in memory, so most of them live only
in the journal. A fresh call must still learn that its key was never recorded without a
disk read: this filter answers "certainly not" for almost every key that is not there, and
"maybe" for every key that is (a false "maybe" costs one read, never a wrong answer).

A Bloom filter is sized for a number of keys. A run's size is not known ahead, so the
filter is a stack of them (Almeida et al., "Scalable Bloom Filters", 2007): when the newest
is full, a larger one with a tighter error rate is added, so that the chance of a false
"maybe" stays under :data:`FALSE_MAYBE` however many keys come. About 2.5 bytes per key.

Written by hand over ``bytearray`` rather than taken from a library: the one piece needed is
these few lines, the well-kept packages (``rbloom``, ``pybloom-live``) are fixed-size or
unmaintained, and the daemon gains no native dependency for it.
"""

from __future__ import annotations

import math

__all__ = ["FALSE_MAYBE", "KeyFilter"]

FALSE_MAYBE = 1e-3
"""The most likely a key never added is answered "maybe" (and read from the journal)."""

_FIRST_CAPACITY = 1024
_GROWTH = 2  # each layer holds twice the keys of the one before
_TIGHTENING = 0.8  # ... at 0.8 times its error rate, so the rates sum to under FALSE_MAYBE
_MASK32 = 0xFFFFFFFF


class _Layer:
    """One fixed-size Bloom filter: ``probes`` bits per key in ``size`` bits."""

    __slots__ = ("bits", "capacity", "count", "probes", "size")

    def __init__(self, capacity: int, error: float) -> None:
        bits_per_key = -math.log(error) / math.log(2) ** 2
        # An odd size: positions spread over every bit whatever the hash's low bits.
        self.size = int(capacity * bits_per_key) | 1
        self.probes = max(1, round(bits_per_key * math.log(2)))
        self.bits = bytearray((self.size + 7) // 8)
        self.capacity = capacity
        self.count = 0

    def add(self, h1: int, h2: int) -> None:
        bits, size = self.bits, self.size
        for i in range(self.probes):
            at = (h1 + i * h2) % size
            bits[at >> 3] |= 1 << (at & 7)
        self.count += 1

    def __contains__(self, hashes: tuple[int, int]) -> bool:
        h1, h2 = hashes
        bits, size = self.bits, self.size
        for i in range(self.probes):
            at = (h1 + i * h2) % size
            if not bits[at >> 3] & (1 << (at & 7)):
                return False
        return True


def _hashes(key: str) -> tuple[int, int]:
    # Python's string hash: fast and cached on the string; it differs between processes,
    # which is fine for a filter that lives in one. Two halves for double hashing.
    h = hash(key) & 0xFFFFFFFFFFFFFFFF
    return h & _MASK32, (h >> 32) | 1


class KeyFilter:
    """Keys added so far: ``key in filter`` is ``False`` only for a key never added."""

    def __init__(self) -> None:
        self._layers = [_Layer(_FIRST_CAPACITY, FALSE_MAYBE * (1 - _TIGHTENING))]

    def add(self, key: str) -> None:
        newest = self._layers[-1]
        if newest.count >= newest.capacity:
            error = FALSE_MAYBE * (1 - _TIGHTENING) * _TIGHTENING ** len(self._layers)
            newest = _Layer(newest.capacity * _GROWTH, error)
            self._layers.append(newest)
        newest.add(*_hashes(key))

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        hashes = _hashes(key)
        return any(hashes in layer for layer in reversed(self._layers))

    @property
    def nbytes(self) -> int:
        """The memory its bits take."""
        return sum(len(layer.bits) for layer in self._layers)
