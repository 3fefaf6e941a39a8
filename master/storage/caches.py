"""A least-recently-used cache bounded by the size of what it holds, not only by its entry count.

Caches keyed by text (token counts of messages, parsed sessions, compiled schemas) must not
grow with the size of what clients send: 600 distinct 100 KB queries would otherwise keep
60 MB of keys alive in a cache bounded by count alone. An entry larger than the whole
budget is not kept at all.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class SizedLRU(Generic[K, V]):
    """At most ``max_size`` units (``size(key, value)``, e.g. bytes) and ``max_entries`` entries."""

    def __init__(self, max_size: int, size: Callable[[K, V], int], *, max_entries: int = 1 << 20) -> None:
        self.max_size = max_size
        self.max_entries = max_entries
        self._size_of = size
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self.size = 0
        """Units held now."""

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: K, value: V) -> None:
        self.pop(key)
        units = self._size_of(key, value)
        if units > self.max_size:
            return
        self._entries[key] = (value, units)
        self.size += units
        while self.size > self.max_size or len(self._entries) > self.max_entries:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.size -= dropped

    def pop(self, key: K) -> V | None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        self.size -= entry[1]
        return entry[0]

    def clear(self) -> None:
        self._entries.clear()
        self.size = 0
