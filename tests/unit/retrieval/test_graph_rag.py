"""graph_rag's final read: the chunks its ids-only lane returned, read whole (ragloom.retrieval.graph_rag)."""

from __future__ import annotations

from types import SimpleNamespace

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
    out = _read_whole(request, [_thin("b", 0.9, 1), walked, _thin("a", 0.5, 2)], {"a", "b", "c"})
    assert [i.chunk_id for i in out] == ["b", "w", "a"]
    assert store.asked == [("recursive", ["b", "a"], True, True)]  # one fetch, under the query's filter
    b = out[0]
    assert (b.text, b.document_id, b.heading_path, b.metadata["title"]) == ("text of b", "doc-b", ["H"], "b")
    assert (b.score, b.rank, b.lane_scores) == (0.9, 1, {"hybrid": 0.9, "graph": 0.45})
    assert out[1] is walked
    assert "lane_read" in request.timings_ms


def test_a_chunk_gone_since_the_lane_ran_is_left_out_and_nothing_thin_means_no_fetch():
    store = Chunks("a")
    assert [i.chunk_id for i in _read_whole(_request(store), [_thin("gone", 0.9, 1), _thin("a", 0.5, 2)],
                                            {"a", "gone"})] == ["a"]
    store.asked.clear()
    whole = [RetrievedItem(chunk_id="x", document_id="d", text="t", score=1.0)]
    assert _read_whole(_request(store), whole, {"a"}) == whole and store.asked == []
