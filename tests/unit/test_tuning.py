"""Tuning knobs that need no store: linear fusion, the stable tie order, the per-document cap, parent
replacement, and the query-embedding LRU. Each test fails when its knob does nothing."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from ragloom.errors import RetrievalError
from ragloom.retrieval import (
    RetrievalContext,
    Retriever,
    SearchRequest,
    fusion,
    get_retriever,
    register_retrieval_strategy,
)
from ragloom.retrieval.options import Option
from ragloom.retrieval.postprocess import cap_per_document, replace_by_parents
from ragloom.types import RetrievedItem


def item(chunk_id: str, score: float, document_id: str = "", **metadata: Any) -> RetrievedItem:
    return RetrievedItem(chunk_id=chunk_id, document_id=document_id or f"d-{chunk_id}", text=chunk_id, score=score,
                         metadata=dict(metadata))


DENSE = [item("a", 0.9), item("b", 0.8), item("c", 0.1)]
BM25 = [item("c", 12.0), item("b", 6.0), item("a", 1.0)]


def ids(items: list[RetrievedItem]) -> list[str]:
    return [i.chunk_id for i in items]


def test_linear_fusion_follows_sparse_weight():
    lists = {"dense": DENSE, "bm25": BM25}
    assert ids(fusion.fuse(lists, "linear", sparse_weight=0.0)) == ["a", "b", "c"]
    assert ids(fusion.fuse(lists, "linear", sparse_weight=1.0)) == ["c", "b", "a"]
    mixed = fusion.fuse(lists, "linear", sparse_weight=0.5)
    # dense normalizes a=1, b=0.875, c=0; bm25 c=1, b=0.4545, a=0: b = 0.5*0.875 + 0.5*0.4545 is best
    assert ids(mixed)[0] == "b" and mixed[0].score == pytest.approx(0.5 * 0.875 + 0.5 * 5 / 11)
    with pytest.raises(RetrievalError, match="sparse_weight"):
        fusion.fuse(lists, "linear", sparse_weight=1.5)


def test_rrf_lane_weights_change_the_order():
    lists = {"dense": DENSE, "bm25": BM25}
    assert ids(fusion.rrf(lists, weights={"dense": 1.0, "bm25": 0.2}))[0] == "a"
    assert ids(fusion.rrf(lists, weights={"dense": 0.2, "bm25": 1.0}))[0] == "c"


def test_ties_are_broken_by_chunk_id_whatever_the_input_order():
    # z and a tie under every method: each is first in one lane and second in the other
    dense, bm25 = [item("z", 1.0), item("a", 0.5)], [item("a", 1.0), item("z", 0.5)]
    for method in fusion.METHODS:
        one = fusion.fuse({"dense": dense, "bm25": bm25}, method)
        other = fusion.fuse({"bm25": bm25[::-1][::-1], "dense": dense}, method)
        assert ids(one) == ids(other) == ["a", "z"] and one[0].score == one[1].score


def test_cap_per_document_keeps_the_best_of_each():
    items = [item("1", 0.9, "x"), item("2", 0.8, "x"), item("3", 0.7, "y"), item("4", 0.6, "x")]
    kept, dropped = cap_per_document(items, 1)
    assert ids(kept) == ["1", "3"] and dropped == ["2", "4"]
    assert ids(cap_per_document(items, 2)[0]) == ["1", "2", "3"]
    assert ids(cap_per_document(items, 0)[0]) == ["1", "2", "3", "4"]


def test_replace_by_parents_gives_each_parent_once_at_its_best_childs_place():
    hits = [item("c1", 0.9, parent_id="p1"), item("c2", 0.8, parent_id="p2"), item("c3", 0.7, parent_id="p1"),
            item("c4", 0.6)]
    parents = {"p1": item("p1", 0.0), "p2": item("p2", 0.0)}
    out = replace_by_parents(hits, parents)
    assert ids(out) == ["p1", "p2", "c4"]
    assert out[0].score == 0.9 and out[0].metadata["expanded_from"] == ["c1", "c3"]


# through the retriever template ------------------------------------------------------------------------


class ListRetriever(Retriever):
    declared_options: dict[str, Option] = {"items": Option(None, kind=tuple, of=object, help="items to return")}
    needs_embedder = False

    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        self.fetch_k = request.fetch_k
        return [RetrievedItem(**{**i.__dict__, "metadata": dict(i.metadata)}) for i in options["items"]]


register_retrieval_strategy("test_tuning_list", ListRetriever)


def test_max_per_document_caps_the_top_k_and_still_fills_it():
    items = (item("1", 0.9, "x"), item("2", 0.8, "x"), item("3", 0.7, "x"), item("4", 0.6, "y"),
             item("5", 0.5, "z"))
    retriever = get_retriever("test_tuning_list", RetrievalContext(vectors=None))
    plain = retriever.search("q", k=3, items=items, dedup=False, abstain=False)
    assert ids(plain.items) == ["1", "2", "3"]
    capped = retriever.search("q", k=3, items=items, dedup=False, abstain=False, max_per_document=1)
    assert ids(capped.items) == ["1", "4", "5"] and capped.metadata["over_document_cap"] == ["2", "3"]


class CountingEmbedder:
    model_id = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        return np.asarray([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_query_embeddings_are_cached_lru():
    embedder = CountingEmbedder()
    context = RetrievalContext(vectors=None, embedder=embedder)
    context.query_vector_size = 2
    first = context.query_vector("alpha")
    assert np.array_equal(context.query_vector("alpha"), first) and embedder.calls == 1
    context.query_vector("beta")
    context.query_vector("alpha")  # alpha is now the most recent; beta the oldest
    context.query_vector("gamma")  # evicts beta
    assert embedder.calls == 3
    context.query_vector("alpha")
    assert embedder.calls == 3
    context.query_vector("beta")
    assert embedder.calls == 4


def test_result_cache_expires_after_its_ttl_and_evicts_the_oldest():
    from ragloom.retrieval.cache import ResultCache
    from ragloom.types import RetrievalResult

    now = [0.0]
    cache = ResultCache(ttl=10, size=2, clock=lambda: now[0])
    cache.put("a", RetrievalResult(query="a", items=[item("x", 1.0)]))
    got = cache.get("a")
    assert got is not None and ids(got.items) == ["x"]
    got.items.clear()  # callers get copies
    assert ids(cache.get("a").items) == ["x"]
    now[0] = 10.5
    assert cache.get("a") is None
    for key in ("b", "c", "d"):
        cache.put(key, RetrievalResult(query=key, items=[]))
    assert cache.get("b") is None and cache.get("c") is not None and cache.get("d") is not None


def test_bm25_analysis_writes_each_word_and_its_marked_stem_without_stopwords():
    from ragloom.stores.analysis import analyze
    from ragloom.stores.weaviate.schema import object_properties
    from ragloom.types import Chunk

    assert analyze("The Studies of running mice, not cats") == (
        "studies ~studi running ~run mice ~mice not ~not cats ~cat")
    # word forms meet through their stem terms only
    assert set(analyze("a study that runs").split()) & set(analyze("studies running").split()) == {"~studi", "~run"}
    chunk = Chunk(chunk_id="c", document_id="d", strategy="recursive", text="Running studies", start=0, end=15,
                  token_count=3, position=0, heading_path=["Trials"])
    assert object_properties(chunk)["bm25_text"] == "trials ~trial running ~run studies ~studi"
    # the document's title goes in front, unless it already is the first heading
    titled = dataclasses.replace(chunk, metadata={"title": "Mouse cohorts"})
    assert object_properties(titled)["bm25_text"] == (
        "mouse ~mous cohorts ~cohort trials ~trial running ~run studies ~studi")
    same = dataclasses.replace(chunk, metadata={"title": "Trials"})
    assert object_properties(same)["bm25_text"] == "trials ~trial running ~run studies ~studi"


def test_bm25_analysis_ranks_the_exact_word_above_a_stem_match():
    import bm25s

    from ragloom.stores.analysis import analyze

    # Snowball stems both "performer" and "performance" to "perform"
    docs = ["The performance was recorded live in Paris.", "The performer was recorded live in Paris."]
    index = bm25s.BM25(k1=1.2, b=0.75)
    index.index([analyze(d).split() for d in docs], show_progress=False)
    scores = index.get_scores(analyze("Who was the performer?").split())
    assert scores[1] > scores[0] > 0  # both match through the stem; the exact word ranks first


def test_bm25_analysis_drops_the_possessive_s_only():
    from ragloom.stores.analysis import analyze

    assert analyze("Peter Bonetti's team") == analyze("Peter Bonetti\u2019s team") == analyze("Peter Bonetti team")
    assert "s" not in analyze("the club's ground").split()
    # other apostrophes and single letters stay words
    assert analyze("vitamin D for O'Brien") == "vitamin ~vitamin d ~d o ~o brien ~brien"
