"""Which step keys a run may have recorded, in a few bytes per key: a scalable Bloom filter.

A run of a million calls cannot keep a million records in memory, so most of them live only
in the journal. A fresh call must still learn that its key was never recorded without a
disk read: this filter answers "certainly not" for almost every key that is not there, and
"maybe" for every key that is (a false "maybe" costs one read, never a wrong answer).

A Bloom filter is sized for a number of keys. A run's size is not known ahead, so the
filter is a stack of them (Almeida et al., "Scalable Bloom Filters", 2007): when the newest
is full, a larger one with a tighter error rate is added, so that the chance of a false
"maybe" stays under :data:`FALSE_MAYBE` however many keys come: 2.2 to 4 bytes a key.

Written by hand over ``bytearray`` rather than taken from a library: the one piece needed is
these few lines, the well-kept packages (``rbloom``, ``pybloom-live``) are fixed-size or
unmaintained, and the daemon gains no native dependency for it. An add or a lookup costs a
few microseconds of Python (``bench/memory.py`` shows what a call pays in a long run).
"""

from __future__ import annotations

import math

__all__ = ["FALSE_MAYBE", "KeyFilter"]

FALSE_MAYBE = 1e-3
"""The most likely a key never added is answered "maybe" (and read from the journal)."""

_FIRST_CAPACITY = 16_384  # allocated with the first key: a short run never adds one
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
        self.probes = range(max(1, round(bits_per_key * math.log(2))))
        self.bits = bytearray((self.size + 7) // 8)
        self.capacity = capacity
        self.count = 0


class KeyFilter:
    """Keys added so far: ``key in filter`` is ``False`` only for a key never added."""

    def __init__(self) -> None:
        self._layers: list[_Layer] = []

    def add(self, key: str) -> None:
        if not self._layers or self._layers[-1].count >= self._layers[-1].capacity:
            capacity = self._layers[-1].capacity * _GROWTH if self._layers else _FIRST_CAPACITY
            error = FALSE_MAYBE * (1 - _TIGHTENING) * _TIGHTENING ** len(self._layers)
            self._layers.append(_Layer(capacity, error))
        newest = self._layers[-1]
        # Python's string hash: fast, and cached on the string; it differs between processes,
        # which is fine for a filter that lives in one. Double hashing: probe i is at
        # h1 + i * h2, stepped by additions rather than multiplied.
        h = hash(key) & 0xFFFFFFFFFFFFFFFF
        bits, size = newest.bits, newest.size
        at, step = (h & _MASK32) % size, ((h >> 32) | 1) % size
        for _ in newest.probes:
            bits[at >> 3] |= 1 << (at & 7)
            at += step
            if at >= size:
                at -= size
        newest.count += 1

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str) or not self._layers:
            return False
        h = hash(key) & 0xFFFFFFFFFFFFFFFF
        h1, h2 = h & _MASK32, (h >> 32) | 1
        for layer in reversed(self._layers):  # the newest holds the most keys
            bits, size = layer.bits, layer.size
            at, step = h1 % size, h2 % size
            for _ in layer.probes:
                if not bits[at >> 3] & (1 << (at & 7)):
                    break
                at += step
                if at >= size:
                    at -= size
            else:
                return True
        return False

    def __len__(self) -> int:
        return sum(layer.count for layer in self._layers)

    @property
    def nbytes(self) -> int:
        """The memory its bits take."""
        return sum(len(layer.bits) for layer in self._layers)
