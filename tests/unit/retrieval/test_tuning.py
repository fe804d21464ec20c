"""Tuning knobs that need no store: linear fusion, the stable tie order, the per-document cap, parent
replacement, neighbour scoring, and the query-embedding LRU. Each test fails when its knob does nothing."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from ragloom.errors import RetrievalError
from ragloom.options import Option
from ragloom.retrieval import (
    RetrievalContext,
    Retriever,
    SearchRequest,
    fusion,
    get_retriever,
    register_retrieval_strategy,
)
from ragloom.retrieval.postprocess import cap_per_document, neighbour_boost, replace_by_parents
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


def unit(chunk_id: str, score: float, position: int, document_id: str = "rules", section: str = "1",
         level: int = 0) -> RetrievedItem:
    found = item(chunk_id, score, document_id, position=position, level=level)
    found.heading_path = ["Rules", section]
    return found


# "b" sits between two retrieved units of its section; "x" ranks above it but stands alone
NEIGHBOURS = [unit("x", 0.80, 7), unit("a", 0.78, 1), unit("b", 0.70, 2), unit("c", 0.60, 3)]


def test_neighbour_boost_lifts_a_hit_whose_neighbours_were_retrieved():
    out = neighbour_boost(NEIGHBOURS, 0.5)
    # b: 0.70 + 0.5 × mean(0.78, 0.60); a: 0.78 + 0.5 × 0.70; c: 0.60 + 0.5 × 0.70; x: no neighbour
    assert ids(out) == ["a", "b", "c", "x"]
    assert out[1].score == pytest.approx(0.70 + 0.5 * 0.69) and out[1].metadata["neighbour_bonus"] > 0
    assert out[3].score == 0.80 and out[3].metadata["neighbour_bonus"] == 0.0
    assert NEIGHBOURS[2].score == 0.70  # the input items are not changed
    assert ids(neighbour_boost(NEIGHBOURS, 0.0)) == ids(NEIGHBOURS) == ["x", "a", "b", "c"]


def test_neighbours_are_adjacent_units_of_one_document_level_and_section():
    elsewhere = [unit("x", 0.80, 7), unit("a", 0.78, 1, document_id="other"), unit("b", 0.70, 2),
                 unit("c", 0.60, 3, level=1), unit("d", 0.60, 4)]  # d is two places from b
    assert ids(neighbour_boost(elsewhere, 0.5))[:2] == ["x", "a"]
    other_section = [unit("x", 0.80, 7), unit("a", 0.78, 1, section="2"), unit("b", 0.70, 2),
                     unit("c", 0.60, 3, section="3")]
    assert ids(neighbour_boost(other_section, 0.5, "section")) == ["x", "a", "b", "c"]
    assert ids(neighbour_boost(other_section, 0.5, "document")) == ["a", "b", "c", "x"]
    context = item("graph", 1.0, source="graph_rag")  # no reading position: never a neighbour, never boosted
    with pytest.raises(RetrievalError, match="neighbour_scope"):
        neighbour_boost(NEIGHBOURS, 0.5, "page")
    out = {i.chunk_id: i for i in neighbour_boost([context, *NEIGHBOURS], 0.5)}
    assert out["graph"].metadata["neighbour_bonus"] == 0.0 and out["graph"].score == 1.0


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
    assert ids(capped.items) == ["1", "4", "5"] and capped.metadata.details["over_document_cap"] == ["2", "3"]


def test_neighbour_weight_reranks_the_candidates_before_the_cut():
    retriever = get_retriever("test_tuning_list", RetrievalContext(vectors=None))
    plain = retriever.search("q", k=2, items=tuple(NEIGHBOURS), dedup=False, abstain=False)
    assert ids(plain.items) == ["x", "a"] and retriever.fetch_k == 2
    boosted = retriever.search("q", k=2, items=tuple(NEIGHBOURS), dedup=False, abstain=False, neighbour_weight=0.5)
    assert ids(boosted.items) == ["a", "b"] and retriever.fetch_k == 8  # room for neighbours below the cut
    assert [i.rank for i in boosted.items] == [1, 2]
    retriever.search("q", k=2, items=tuple(NEIGHBOURS), dedup=False, abstain=False, neighbour_weight=0.5,
                     neighbour_candidates=3)
    assert retriever.fetch_k == 3
    retriever.search("q", k=2, items=tuple(NEIGHBOURS), dedup=False, abstain=False, neighbour_candidates=3)
    assert retriever.fetch_k == 2  # without a weight the candidates are the plain search's
    with pytest.raises(RetrievalError, match="neighbour_scope"):
        retriever.search("q", k=2, items=tuple(NEIGHBOURS), neighbour_weight=0.5, neighbour_scope="page")


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


def test_query_vector_cache_of_zero_keeps_none(monkeypatch):
    """RAGLOOM_QUERY_VECTOR_CACHE=0 (the load benchmark's setting): every query pays its embedding; a search still
    embeds its query once (SearchRequest.vector)."""
    from ragloom.errors import ConfigError
    from ragloom.settings import Settings

    embedder = CountingEmbedder()
    context = RetrievalContext(vectors=None, embedder=embedder, query_vector_cache=0)
    for _ in range(3):
        context.query_vector("alpha")
    assert embedder.calls == 3
    monkeypatch.setenv("RAGLOOM_QUERY_VECTOR_CACHE", "0")
    assert Settings.from_env().query_vector_cache == 0
    monkeypatch.setenv("RAGLOOM_QUERY_VECTOR_CACHE", "-1")
    with pytest.raises(ConfigError, match="RAGLOOM_QUERY_VECTOR_CACHE"):
        Settings.from_env()


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
    from ragloom.metadata import MetadataLayout
    from ragloom.stores.analysis import analyze
    from ragloom.stores.weaviate.schema import object_properties
    from ragloom.types import Chunk

    assert analyze("The Studies of running mice, not cats") == (
        "studies ~studi running ~run mice ~mice not ~not cats ~cat")
    # word forms meet through their stem terms only
    assert set(analyze("a study that runs").split()) & set(analyze("studies running").split()) == {"~studi", "~run"}
    chunk = Chunk(chunk_id="c", document_id="d", strategy="recursive", text="Running studies", start=0, end=15,
                  token_count=3, position=0, heading_path=["Trials"])
    assert object_properties(chunk, MetadataLayout())["bm25_text"] == "trials ~trial running ~run studies ~studi"
    # the document's title goes in front, unless it already is the first heading
    titled = dataclasses.replace(chunk, metadata={"title": "Mouse cohorts"})
    assert object_properties(titled, MetadataLayout())["bm25_text"] == (
        "mouse ~mous cohorts ~cohort trials ~trial running ~run studies ~studi")
    same = dataclasses.replace(chunk, metadata={"title": "Trials"})
    assert object_properties(same, MetadataLayout())["bm25_text"] == "trials ~trial running ~run studies ~studi"


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
