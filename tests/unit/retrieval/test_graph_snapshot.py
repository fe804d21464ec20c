"""The graph snapshot's version check (read at most every few seconds, at once after a local sync) and query
entity matching against the snapshot's names."""

from __future__ import annotations

from typing import Any

from ragloom.retrieval.graph_index import GraphCache, snapshot_cache

ROWS = {
    "chunks": [{"chunk_id": "c1", "scope_path": "", "entity_ids": ["e1"], "counts": [1]}],
    "entities": [{"entity_id": "e1", "name": "Ada Lovelace", "type": "PERSON", "norm": "ada lovelace",
                  "alias_norms": []}],
    "relations": [],
}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class VersionedGraph:
    """A graph store's read side as GraphCache uses it, counting the version reads and the loads."""

    def __init__(self, local: bool = True) -> None:
        self.current = "v1"
        self.version_reads = self.loads = 0
        self.stamped = 0
        if not local:
            self.local_writes = None  # type: ignore[assignment]  (a store that cannot tell)

    def graph_version(self, strategy: str) -> str:
        self.version_reads += 1
        return self.current

    def retrieval_graph_rows(self, strategy: str) -> dict[str, Any]:
        self.loads += 1
        return ROWS

    def local_writes(self) -> int:
        return self.stamped


def test_the_version_is_read_at_most_once_per_interval():
    store, clock = VersionedGraph(), Clock()
    cache = GraphCache(store, version_seconds=2.0, clock=clock)
    first = cache.get("recursive")
    for _ in range(50):
        assert cache.get("recursive") is first
        assert cache.version("recursive") == "v1"
    assert (store.version_reads, store.loads) == (1, 1)
    store.current = "v2"  # another process synced: seen once the interval has passed, not before
    clock.now += 1.9
    assert cache.get("recursive") is first
    clock.now += 0.2
    second = cache.get("recursive")
    assert second is not first and second.version == "v2"
    assert (store.version_reads, store.loads) == (2, 2)


def test_a_sync_in_this_process_is_seen_at_once():
    store, clock = VersionedGraph(), Clock()
    cache = GraphCache(store, version_seconds=60.0, clock=clock)
    first = cache.get("recursive")
    store.current, store.stamped = "v2", 1  # this process stamped a new version
    assert cache.get("recursive") is not first
    assert store.version_reads == 2
    cache.get("recursive")
    assert store.version_reads == 2


def test_zero_seconds_reads_every_time_and_invalidate_forgets():
    store, clock = VersionedGraph(local=False), Clock()
    cache = GraphCache(store, version_seconds=0.0, clock=clock)
    for _ in range(3):
        cache.get("recursive")
    assert (store.version_reads, store.loads) == (3, 1)
    throttled = GraphCache(store, version_seconds=10.0, clock=clock)
    throttled.version("recursive")
    throttled.invalidate()
    throttled.version("recursive")
    assert store.version_reads == 5


def test_one_cache_per_store_in_a_context_with_the_contexts_interval():
    class Context:
        cache: dict[Any, Any] = {}
        graph_version_seconds = 3.0

    store = VersionedGraph()
    cache = snapshot_cache(Context, store)
    assert snapshot_cache(Context, store) is cache and cache.version_seconds == 3.0
