"""A result cache: whole retrieval results kept for a time-to-live, keyed by everything that decides them.

The key holds the strategy, chunking, query, k, every option, the scope, the filters and the collection's
version stamp (``WeaviateStore.collection_version``: it changes with every write or delete), so a sync that
changes the collection invalidates every cached result of it, in every process, at the next lookup.
Graph strategies' keys also hold the graph version, read through the graph snapshot cache's throttle
(``GraphCache.version``): a graph change made by another process is seen within ``graph_version_seconds``.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ragloom.errors import ConfigError
from ragloom.types import RetrievalResult


def result_key(**parts: Any) -> str:
    return json.dumps(parts, sort_keys=True, default=str)


class ResultCache:
    """LRU of at most ``size`` results, each valid for ``ttl`` seconds. Results go in and out as copies."""

    def __init__(self, ttl: float, size: int = 512, clock: Callable[[], float] = time.monotonic) -> None:
        if ttl <= 0 or size < 1:
            raise ConfigError(f"result cache: ttl={ttl} must be > 0 and size={size} >= 1")
        self.ttl, self.size, self._clock = ttl, size, clock
        self._items: OrderedDict[str, tuple[float, RetrievalResult]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: str) -> RetrievalResult | None:
        with self._lock:
            held = self._items.get(key)
            if held is None or self._clock() - held[0] > self.ttl:
                self._items.pop(key, None)
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return copy.deepcopy(held[1])

    def put(self, key: str, result: RetrievalResult) -> None:
        with self._lock:
            self._items[key] = (self._clock(), copy.deepcopy(result))
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
