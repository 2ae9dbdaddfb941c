"""An in-process cache for metadata lookups: least-recently-used eviction plus a time to live."""
from __future__ import annotations

import time
from collections import OrderedDict
from typing import Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TTLCache(Generic[K, V]):
    """Holds at most `max_entries` items; each expires `ttl` seconds after it was stored.

    When the cache is full, storing a new item evicts the one that was read or written longest
    ago. Quota checks read tenants from here on every request, so a hit must stay cheap.
    """

    def __init__(self, max_entries: int = 10_000, ttl: float = 30.0):
        self.max_entries = max_entries
        self.ttl = ttl
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self.hits = self.misses = 0

    def get(self, key: K) -> V | None:
        found = self._items.get(key)
        if found is None or found[0] < time.monotonic():
            self._items.pop(key, None)
            self.misses += 1
            return None
        self._items.move_to_end(key)
        self.hits += 1
        return found[1]

    def put(self, key: K, value: V) -> None:
        self._items[key] = (time.monotonic() + self.ttl, value)
        self._items.move_to_end(key)
        while len(self._items) > self.max_entries:
            self._items.popitem(last=False)

    def invalidate(self, key: K) -> None:
        self._items.pop(key, None)
