"""graph_rag's final read: the chunks its ids-only lane returned, read whole (ragloom.retrieval.graph_rag)."""

from __future__ import annotations

from types import SimpleNamespace

from ragloom.retrieval import postprocess as pp
from ragloom.retrieval.base import SearchRequest
from ragloom.retrieval.graph_rag import _read_whole
from ragloom.types import RetrievedItem, Scope


class Chunks:
    """A vector store that holds some whole chunks and records what it was asked to fetch."""

    def __init__(self, *ids: str) -> None:
        self.whole = {c: RetrievedItem(chunk_id=c, document_id=f"doc-{c}", text=f"text of {c}", score=0.0, rank=9,
                                       heading_path=["H"], metadata={"title": c, "vector": [1.0, 0.0]}) for c in ids}
        self.asked: list[tuple] = []

    def fetch(self, strategy, chunk_ids, where=None, include_vectors=False):
        self.asked.append((strategy, list(chunk_ids), where is not None, include_vectors))
        return [self.whole[c] for c in chunk_ids if c in self.whole]


def _request(store: Chunks) -> SearchRequest:
    return SearchRequest(query="q", k=3, scope=Scope("acme"), filters=None, chunking="recursive",
                         context=SimpleNamespace(vectors=store), fetch_k=6, include_vectors=True)


def _thin(chunk_id: str, score: float, rank: int) -> RetrievedItem:
    return RetrievedItem(chunk_id=chunk_id, document_id="", text="", score=score, rank=rank,
                         lane_scores={"hybrid": score, "graph": score / 2}, metadata={"parent_id": None})


def test_thin_items_are_read_whole_in_one_fetch_keeping_their_scores_and_ranks():
    store = Chunks("a", "b", "c")
    walked = RetrievedItem(chunk_id="w", document_id="doc-w", text="fetched by the walk", score=0.3)
    request = _request(store)
    out, tried = _read_whole(request, [_thin("b", 0.9, 1), walked, _thin("a", 0.5, 2)], {"a", "b", "c"})
    assert [i.chunk_id for i in out] == ["b", "w", "a"] and tried == 3
    assert store.asked == [("recursive", ["b", "a"], True, True)]  # one fetch, under the query's filter
    b = out[0]
    assert (b.text, b.document_id, b.heading_path, b.metadata["title"]) == ("text of b", "doc-b", ["H"], "b")
    assert (b.score, b.rank, b.lane_scores) == (0.9, 1, {"hybrid": 0.9, "graph": 0.45})
    assert out[1] is walked
    assert "lane_read" in request.timings_ms


def test_a_chunk_gone_since_the_lane_ran_is_left_out_and_nothing_thin_means_no_fetch():
    store = Chunks("a")
    out, tried = _read_whole(_request(store), [_thin("gone", 0.9, 1), _thin("a", 0.5, 2)], {"a", "gone"})
    assert [i.chunk_id for i in out] == ["a"] and tried == 2
    store.asked.clear()
    whole = [RetrievedItem(chunk_id="x", document_id="d", text="t", score=1.0)]
    assert _read_whole(_request(store), whole, {"a"}) == (whole, 1) and store.asked == []


def _spread(store: Chunks, copies: dict[str, str] | None = None) -> Chunks:
    """Each chunk its own direction; ``copies`` (chunk -> chunk) gives a chunk another's vector."""
    for n, c in enumerate(sorted(store.whole)):
        store.whole[c].metadata["vector"] = [float(n == i) for i in range(len(store.whole))]
    for copy, of in (copies or {}).items():
        store.whole[copy].metadata["vector"] = list(store.whole[of].metadata["vector"])
    return store


def _keeping(store: Chunks, k: int) -> SearchRequest:
    request = _request(store)
    request.k = k
    request.enough = lambda items: pp.keeps(items, k, pp.DEFAULT_DEDUP_THRESHOLD)
    return request


def test_with_enough_the_first_k_are_read_and_the_rest_left_out():
    store = _spread(Chunks("a", "b", "c", "d"))
    items = [_thin(c, 1.0 - n / 10, n + 1) for n, c in enumerate("abcd")]
    out, tried = _read_whole(_keeping(store, 2), items, set("abcd"))
    assert [i.chunk_id for i in out] == ["a", "b"] and tried == 2
    assert [ids for _, ids, _, _ in store.asked] == [["a", "b"]]
    assert all(i.text for i in out)


def test_a_near_duplicate_or_a_gone_chunk_in_the_first_k_reads_the_rest():
    for store, first in [(_spread(Chunks("a", "b", "c", "d"), copies={"b": "a"}), ["a", "b"]),  # b copies a
                         (_spread(Chunks("a", "c", "d")), ["a"])]:  # b is gone from the store
        items = [_thin(c, 1.0 - n / 10, n + 1) for n, c in enumerate("abcd")]
        out, tried = _read_whole(_keeping(store, 2), items, set("abcd"))
        assert [i.chunk_id for i in out] == [*first, "c", "d"] and tried == 4
        assert [ids for _, ids, _, _ in store.asked] == [["a", "b"], ["c", "d"]]


def test_keeps_counts_what_survives_de_duplication():
    store = _spread(Chunks("a", "b", "c"), copies={"b": "a"})
    whole = [store.whole[c] for c in "abc"]
    assert pp.keeps(whole, 2, pp.DEFAULT_DEDUP_THRESHOLD) and not pp.keeps(whole, 3, pp.DEFAULT_DEDUP_THRESHOLD)
    assert pp.keeps(whole, 3, None)  # no de-duplication: every item counts
