"""The graph snapshot's version check (read at most every few seconds, at once after a local sync) and query
entity matching against the snapshot's names."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from ragloom.errors import StoreError
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
    assert cache.get("recursive") is first  # the query that finds it stale answers at once; a read starts behind it
    settle(cache)
    second = cache.get("recursive")
    assert second is not first and second.version == "v2"
    assert (store.version_reads, store.loads) == (2, 2)


def settle(cache: GraphCache) -> None:
    """Wait for a version read started behind a query to end."""
    assert cache._reading.acquire(timeout=5), "a version read did not end"
    cache._reading.release()


def test_a_stale_version_is_read_behind_the_query_that_finds_it_once_at_a_time():
    store, clock = SilentGraph(), Clock()
    cache = GraphCache(store, version_seconds=2.0, clock=clock)
    first = cache.get("recursive")
    store.current = "v2"
    store.entered.clear()
    store.release.clear()  # the read hangs until released: no query waits for it
    clock.now += 2.1
    for _ in range(5):
        assert cache.get("recursive") is first
    assert store.entered.wait(5)
    store.release.set()
    settle(cache)
    assert store.version_reads == 2  # one read for the five stale queries
    assert cache.get("recursive").version == "v2"


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


class SilentGraph(VersionedGraph):
    """A store whose version reads fail while ``down`` (after the driver's timeouts, in the real store), and can
    hold a read until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.entered, self.release = threading.Event(), threading.Event()
        self.release.set()

    def graph_version(self, strategy: str) -> str:
        self.entered.set()
        self.release.wait(10)
        if self.down:
            self.version_reads += 1
            raise StoreError("neo4j (read in namespace 'x'): the server did not answer in time")
        return super().graph_version(strategy)


def test_a_failed_version_read_keeps_the_held_graph_and_says_why():
    store, clock = SilentGraph(), Clock()
    cache = GraphCache(store, version_seconds=2.0, clock=clock)
    first = cache.get("recursive")
    assert cache.unanswered("recursive") == ""
    store.down = True
    clock.now += 2.1
    assert cache.get("recursive") is first
    settle(cache)
    assert "did not answer" in cache.unanswered("recursive")
    for _ in range(5):  # not asked again within the interval
        assert cache.get("recursive") is first
    assert store.version_reads == 2
    store.down, store.current = False, "v2"
    clock.now += 2.1
    assert cache.get("recursive") is first
    settle(cache)
    assert cache.get("recursive").version == "v2"
    assert cache.unanswered("recursive") == ""


def test_with_nothing_held_a_failed_version_read_raises():
    store = SilentGraph()
    store.down = True
    with pytest.raises(StoreError):
        GraphCache(store, version_seconds=2.0, clock=Clock()).get("recursive")


def test_while_one_thread_reads_the_version_the_others_answer_from_the_held_one():
    store, clock = SilentGraph(), Clock()
    cache = GraphCache(store, version_seconds=0.0, clock=clock)
    first = cache.get("recursive")
    store.entered.clear()
    store.release.clear()  # the next read hangs until released
    reader = threading.Thread(target=cache.get, args=("recursive",))
    reader.start()
    assert store.entered.wait(5)
    try:
        for _ in range(3):  # version_seconds 0 reads on every use, but not while a read is in flight
            assert cache.get("recursive") is first
    finally:
        store.release.set()
        reader.join(5)
    assert store.version_reads == 2


def test_one_cache_per_store_in_a_context_with_the_contexts_interval():
    class Context:
        cache: dict[Any, Any] = {}
        graph_version_seconds = 3.0

    store = VersionedGraph()
    cache = snapshot_cache(Context, store)
    assert snapshot_cache(Context, store) is cache and cache.version_seconds == 3.0


# query entity matching ------------------------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ragloom.retrieval import entity_match  # noqa: E402
from ragloom.retrieval.graph_index import build_graph  # noqa: E402

NAMES = [("Ada Lovelace", "PERSON"), ("Charles Babbage", "PERSON"), ("Analytical Engine", "PRODUCT"),
         ("London", "GPE"), ("Royal Society of London", "ORG"), ("Americans", "NORP"), ("KRAS", "ORG"),
         ("EU", "ORG"), ("Peter Phillip Bonetti", "PERSON")]
FILLER = ["the", "engine", "of", "who", "met", "in", "and", "what", "did", "royal", "ada", "society", "first",
          "Did", "Who", "americans", "KRAS-RalB", "EU's", "bonetti", "Peter", "(TKIs)", "U.S.", "London,"]


@pytest.fixture(scope="module")
def nlp():
    from ragloom.extraction import load_nlp

    return load_nlp()


@pytest.fixture(scope="module")
def graph():
    from ragloom.extraction import normalize_name

    entities = [{"entity_id": f"e{i}", "name": n, "type": t, "norm": normalize_name(n, t), "alias_norms": []}
                for i, (n, t) in enumerate(NAMES)]
    chunks = [{"chunk_id": "c0", "scope_path": "", "entity_ids": [e["entity_id"] for e in entities],
               "counts": [1] * len(entities)}]
    return build_graph({"chunks": chunks, "entities": entities, "relations": []})


def full_pass(graph, nlp, text):
    """What graph_rag matched before the dictionary pass: NER and the n-grams on every query."""
    names = entity_match.ner_names(nlp, text)
    grams = entity_match.query_grams(text, nlp.Defaults.stop_words)
    return set(graph.match_names(names)) | set(graph.match_names(grams, partial_limit=0))


@pytest.mark.parametrize("text", [
    "Who did Ada Lovelace meet in London?", "what did ada lovelace build", "KRAS-RalB signaling in cells",
    "Did Americans fund the Analytical Engine?", "Was Peter Bonetti a member of the Royal Society?",
    "the EU's first engine", "nothing here names an entity"])
def test_the_dictionary_pass_matches_what_ner_and_ngrams_match(graph, nlp, text):
    found, _ran = entity_match.match_query(graph, text, nlp)
    assert set(found) == full_pass(graph, nlp, text)


def test_ner_is_skipped_when_no_name_it_could_return_adds_an_entity(graph, nlp, monkeypatch):
    calls = []
    real = entity_match.ner_names
    monkeypatch.setattr(entity_match, "ner_names", lambda *a: calls.append(a) or real(*a))
    found, ran = entity_match.match_query(graph, "what did ada lovelace build in london", nlp)
    assert not ran and not calls and {graph.entity_names[e] for e in found} == {"Ada Lovelace", "London"}
    # "Peter Bonetti" matches "Peter Phillip Bonetti" only partially, which only NER's names may do
    found, ran = entity_match.match_query(graph, "Was Peter Bonetti a goalkeeper?", nlp)
    assert ran and calls and "Peter Phillip Bonetti" in {graph.entity_names[e] for e in found}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(FILLER + [n for n, _ in NAMES]), min_size=1, max_size=10))
def test_skipping_ner_never_changes_the_entities_matched(graph, nlp, words):
    text = " ".join(words)
    found, _ran = entity_match.match_query(graph, text, nlp)
    assert set(found) == full_pass(graph, nlp, text)


def test_concurrent_ner_calls_run_side_by_side_with_one_blas_thread(monkeypatch):
    """The one-thread BLAS limit is process-wide and counted: two queries' NER overlap on worker threads (a lock
    held over the whole call would keep the second out until the first finished), OpenBLAS really runs one
    thread while either is inside, and the original thread counts are back when both are out. The main thread
    holds threadpoolctl's control first, as it does where it set a limit before (a warm-up query): threadpoolctl
    then ignores every other thread's limit, and NER on the service's worker threads ran on two BLAS threads."""
    import threading

    from threadpoolctl import OpenBLASController, ThreadpoolController, threadpool_info

    from ragloom.extraction import blas

    def blas_threads() -> list[int]:
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    both_inside = threading.Barrier(2, timeout=10)
    seen: list[tuple[int, list[int]]] = []

    def fake_ner(nlp, text):
        both_inside.wait()  # broken (BrokenBarrierError) unless the other call is inside at the same time
        seen.append((blas._users, blas_threads()))
        both_inside.wait()
        return [text]

    monkeypatch.setattr(entity_match, "query_entities", fake_ner)
    results: list[list[str]] = []
    held = ThreadpoolController().limit(limits=2, user_api="blas")  # the main thread takes control
    original = blas_threads()
    try:
        threads = [threading.Thread(target=lambda t=t: results.append(entity_match.ner_names(None, t)))
                   for t in ("first", "second")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        after = blas_threads()
    finally:
        held.restore_original_limits()
        OpenBLASController.clear_controlling_thread(force=True)
    assert sorted(results) == [["first"], ["second"]]
    assert seen == [(2, [1] * len(original))] * 2, (original, seen)
    assert blas._users == 0 and blas._limit is None and after == original
