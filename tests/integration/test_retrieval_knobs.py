"""Tuning knobs on the real Weaviate: parent-document expansion for every flat strategy, the per-document cap,
neighbour scoring, linear fusion's sparse weight, and hybrid degrading to the lanes that still work.

One small ObliQA corpus (hierarchical chunks: they have parents) in its own collections, deleted afterwards.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragloom.api import Ragloom
from ragloom.chunking import get_chunker
from ragloom.embedding import make_embedder
from ragloom.errors import EmbeddingError, RetrievalError
from ragloom.evaluation.datasets import load_dataset
from ragloom.indexing.vectors import sync_vectors
from ragloom.settings import Settings
from ragloom.stores.embedding_cache import EmbeddingCache
from ragloom.stores.weaviate import WeaviateStore

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
DOCUMENTS = ("32", "25", "16")  # three short ObliQA rulebooks
NO_POST = {"abstain": False, "dedup": False}


@pytest.fixture(scope="module")
def obliqa():
    return load_dataset(DATA / "obliqa").restricted_to(DOCUMENTS)


@pytest.fixture(scope="module")
def rag(settings: Settings, obliqa, module_weaviate_store_factory) -> Iterator[Ragloom]:
    vectors = module_weaviate_store_factory(f"TestKnobs{uuid.uuid4().hex[:8]}")
    ns = dataclasses.replace(settings, collection_prefix=vectors.prefix)
    embedder = make_embedder(settings)
    chunks = get_chunker("hierarchical").chunk_many(obliqa.documents)
    sync_vectors(vectors, embedder, "hierarchical", chunks,
                 cache=EmbeddingCache(settings.artifacts_dir / "embedding_cache"))
    with Ragloom(ns, vectors=vectors, embedder=embedder) as rag:
        yield rag


@pytest.mark.parametrize("strategy", ["dense", "bm25", "hybrid"])
def test_parent_document_returns_the_parents_of_the_hits(rag, obliqa, strategy):
    query = obliqa.queries[0].text
    plain = rag.query(query, strategy=strategy, chunking="hierarchical", k=6, **NO_POST)
    expanded = rag.query(query, strategy=strategy, chunking="hierarchical", k=6, parent_document=True, **NO_POST)
    with_parent = [i for i in plain.items if i.metadata.get("parent_id")]
    assert with_parent, "the hierarchical collection's hits have parents"
    held = {cid: e for e in expanded.items for cid in e.metadata.get("expanded_from", [])}
    for hit in with_parent:
        parent = held[hit.chunk_id]
        assert parent.chunk_id == hit.metadata["parent_id"] and hit.text in parent.text
    assert len({i.chunk_id for i in expanded.items}) == len(expanded.items)


def test_max_per_document_caps_each_document(rag, obliqa):
    query = obliqa.queries[0].text
    plain = rag.query(query, strategy="hybrid", chunking="hierarchical", k=8, **NO_POST)
    per_doc = [i.document_id for i in plain.items]
    assert max(per_doc.count(d) for d in per_doc) > 1  # without the cap one rulebook holds several places
    capped = rag.query(query, strategy="hybrid", chunking="hierarchical", k=8, max_per_document=1, **NO_POST)
    docs = [i.document_id for i in capped.items]
    assert len(docs) == len(set(docs)) and len(docs) >= 2
    assert capped.metadata.details["over_document_cap"]


def test_neighbour_weight_reads_reading_order_from_the_store(rag, obliqa):
    moved = 0
    for query in obliqa.queries[:3]:
        plain = rag.query(query.text, strategy="hybrid", chunking="hierarchical", k=8, **NO_POST)
        boosted = rag.query(query.text, strategy="hybrid", chunking="hierarchical", k=8, neighbour_weight=1.0,
                            **NO_POST)
        bonuses = [i.metadata["neighbour_bonus"] for i in boosted.items]
        assert any(b > 0 for b in bonuses)  # positions and levels came back from Weaviate
        scores = [i.score for i in boosted.items]
        assert scores == sorted(scores, reverse=True)
        moved += [i.chunk_id for i in boosted.items] != [i.chunk_id for i in plain.items]
    assert moved


def test_linear_fusion_sparse_weight_moves_between_the_lanes(rag, obliqa):
    query = obliqa.queries[1].text
    common = {"client_fusion": True, "fusion": "linear", **NO_POST}
    dense = rag.query(query, strategy="dense", chunking="hierarchical", k=5, **NO_POST)
    bm25 = rag.query(query, strategy="bm25", chunking="hierarchical", k=5, **NO_POST)
    assert [i.chunk_id for i in dense.items] != [i.chunk_id for i in bm25.items]
    all_dense = rag.query(query, strategy="hybrid", chunking="hierarchical", k=5, sparse_weight=0.0, **common)
    all_bm25 = rag.query(query, strategy="hybrid", chunking="hierarchical", k=5, sparse_weight=1.0, **common)
    assert [i.chunk_id for i in all_dense.items] == [i.chunk_id for i in dense.items]
    assert [i.chunk_id for i in all_bm25.items] == [i.chunk_id for i in bm25.items]


class BrokenEmbedder:
    model_id = "broken"
    dimension = 384

    def encode(self, texts):
        raise EmbeddingError("the embedding model crashed")


@pytest.mark.parametrize("options", [{}, {"client_fusion": True}])
def test_hybrid_degrades_to_bm25_when_the_dense_lane_fails(rag, obliqa, options):
    broken = Ragloom(rag.settings, vectors=rag.context.vectors, embedder=BrokenEmbedder())
    query = obliqa.queries[0].text
    result = broken.query(query, strategy="hybrid", chunking="hierarchical", k=5, **options, **NO_POST)
    bm25 = rag.query(query, strategy="bm25", chunking="hierarchical", k=5, **NO_POST)
    assert [i.chunk_id for i in result.items] == [i.chunk_id for i in bm25.items]
    assert any("dense" in f and "the embedding model crashed" in f for f in result.metadata.fallbacks)
    with pytest.raises(RetrievalError, match="every lane failed"):
        broken.query(query, strategy="hybrid", chunking="hierarchical", k=5, client_fusion=True, lanes=["dense"],
                     **NO_POST)


def test_result_cache_hits_until_the_collection_changes(rag, obliqa):
    cached = Ragloom(dataclasses.replace(rag.settings, result_cache_ttl_seconds=600), vectors=rag.context.vectors,
                     embedder=rag.context.embedder)
    query = obliqa.queries[2].text
    first = cached.query(query, strategy="hybrid", chunking="hierarchical", k=5)
    again = cached.query(query, strategy="hybrid", chunking="hierarchical", k=5)
    assert first.metadata.cache == "miss" and again.metadata.cache == "hit"
    assert [i.chunk_id for i in again.items] == [i.chunk_id for i in first.items]
    other_k = cached.query(query, strategy="hybrid", chunking="hierarchical", k=4)
    other_scope = cached.query(query, strategy="hybrid", chunking="hierarchical", k=5, scope="acme")
    other_option = cached.query(query, strategy="hybrid", chunking="hierarchical", k=5, alpha=0.2)
    assert {r.metadata.cache for r in (other_k, other_scope, other_option)} == {"miss"}
    # a write changes the collection's version: the next lookup misses
    extra = get_chunker("hierarchical").chunk_many([dataclasses.replace(obliqa.documents[0], document_id="extra")])
    vectors = rag.context.vectors
    vectors.upsert_chunks("hierarchical", extra[:1], rag.context.embedder.encode([extra[0].embed_text]))
    try:
        assert cached.query(query, strategy="hybrid", chunking="hierarchical", k=5).metadata.cache == "miss"
        assert cached.query(query, strategy="hybrid", chunking="hierarchical", k=5).metadata.cache == "hit"
    finally:
        vectors.delete_chunks("hierarchical", [extra[0].chunk_id])
    assert cached.query(query, strategy="hybrid", chunking="hierarchical", k=5).metadata.cache == "miss"


def test_bm25_matches_word_forms_through_the_stemmed_property(settings, tmp_path, weaviate_store_factory):
    from ragloom.evaluation.datasets import read_corpus

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        '{"_id": "mice", "title": "Mice", "text": "Earlier studies of running mice measured their hearts."}\n'
        '{"_id": "cats", "title": "Cats", "text": "A cat sat on the mat and slept all afternoon."}\n'
        '{"_id": "performance", "title": "Live one", "text": "The performance was in Paris."}\n'
        '{"_id": "performer", "title": "Live two", "text": "The performer was recorded in Paris."}\n')
    documents = read_corpus(corpus, "stems")
    prefix = weaviate_store_factory(f"TestStems{uuid.uuid4().hex[:8]}").prefix  # dropped and checked at teardown
    ns = dataclasses.replace(settings, collection_prefix=prefix, bm25_k1=1.5, bm25_b=0.5)
    embedder = make_embedder(settings)
    with WeaviateStore.connect(ns) as vectors:
        chunks = get_chunker("recursive").chunk_many(documents)
        sync_vectors(vectors, embedder, "recursive", chunks)
        info = vectors.collection_info("recursive")
        assert info["bm25"] and (info["bm25_k1"], info["bm25_b"]) == (1.5, 0.5)
        config = vectors.client.collections.use(vectors.collection_name("recursive")).config.get()
        assert (config.inverted_index_config.bm25.k1, config.inverted_index_config.bm25.b) == (1.5, 0.5)
        # neither "study" nor "runs" appears in the text: only their stems do
        hits = vectors.bm25("recursive", "a study that runs", 5)
        assert [h.document_id for h in hits] == ["mice"] and "bm25_text" not in hits[0].metadata
        assert vectors.bm25("recursive", "the and of", 5) == []  # stopwords only
        # both match through the stem "perform"; the exact word ranks first (the shorter text would win on the
        # stem alone)
        assert [h.document_id for h in vectors.bm25("recursive", "Who was the performer's?", 5)] == [
            "performer", "performance"]
        hybrid = vectors.hybrid("recursive", "a study that runs", embedder.encode(["study runs"])[0], 5, alpha=0.0)
        assert hybrid and hybrid[0].document_id == "mice"


def test_the_flat_search_cutoff_is_set_at_creation_and_applied_in_place(settings, weaviate_store_factory):
    """RAGLOOM_WEAVIATE_FLAT_SEARCH_CUTOFF: a new collection gets it, and an existing one takes a changed value at
    its next sync (as the BM25 parameters do), recorded in its description."""
    prefix = weaviate_store_factory(f"TestCutoff{uuid.uuid4().hex[:8]}").prefix  # dropped and checked at teardown

    def cutoff(vectors: WeaviateStore) -> tuple[int, int]:
        config = vectors.client.collections.use(vectors.collection_name("recursive")).config.get()
        return (config.vector_config["default"].vector_index_config.flat_search_cutoff,
                vectors.collection_info("recursive")["flat_search_cutoff"])

    for value in (1234, 56):
        ns = dataclasses.replace(settings, collection_prefix=prefix, weaviate_flat_search_cutoff=value)
        with WeaviateStore.connect(ns) as vectors:
            vectors.ensure_collection("recursive", 4, model_id="probe")
            assert cutoff(vectors) == (value, value)


HIER = {"strategy": "hierarchical", "auto_merge": False, **NO_POST}


def test_hierarchical_level_with_nothing_above_its_floor(rag, obliqa):
    query = obliqa.queries[0].text
    common = {"min_score": 0.99, "lane": "dense", **NO_POST}  # no section scores a cosine of 0.99
    empty = rag.query(query, strategy="hierarchical", k=5, **common)
    assert empty.items == [] and empty.metadata.details["hierarchical"]["empty_level"] == "section"
    flat = rag.query(query, strategy="hierarchical", k=5, empty_level="flat", **common)
    assert flat.items and flat.metadata.fallbacks == ["hierarchical->flat: no section chunk scored >= 0.99; "
                                                         "child searched flat"]
    assert all(i.metadata["level"] == 3 for i in flat.items)
    # a constrained level with nothing to search: the children of the one parent kept, all under the floor
    children = rag.query(query, k=5, lane="dense", level_top_k={"section": 1, "parent_1024": 1},
                         score_threshold={"child": 0.99}, **HIER)
    assert children.items == [] and children.metadata.details["hierarchical"]["empty_level"] == "child"


def test_hierarchical_output_level_returns_that_levels_chunks(rag, obliqa):
    query = obliqa.queries[1].text
    children = rag.query(query, k=5, **HIER)
    assert {i.metadata["level"] for i in children.items} == {3}
    parents = rag.query(query, k=5, output_level="parent_1024", **HIER)
    assert parents.items and {i.metadata["level"] for i in parents.items} == {2}
    info = parents.metadata.details["hierarchical"]
    assert info["output_level"] == "parent_1024" and info["levels_searched"] == ["section", "parent_1024"]
    assert all(i.metadata["parent_id"] in info["parents"] for i in parents.items)  # under the kept sections
    sections = rag.query(query, k=3, output_level="section", **HIER)
    assert {i.metadata["level"] for i in sections.items} == {1}
    assert sections.metadata.details["hierarchical"]["levels_searched"] == ["section"]  # nothing above it to search


def test_hierarchical_constrain_by_chooses_the_levels_that_restrict_the_output(rag, obliqa):
    query = obliqa.queries[0].text
    narrow = {"level_top_k": {"section": 1, "parent_1024": 2}}
    runs = {mode: rag.query(query, k=10, constrain_by=mode, **narrow, **HIER) for mode in ("all", "previous", "none")}
    info = {mode: r.metadata.details["hierarchical"] for mode, r in runs.items()}
    assert info["all"]["levels_searched"] == ["section", "parent_1024", "child"]
    assert info["previous"]["levels_searched"] == ["parent_1024", "child"]
    assert info["none"]["levels_searched"] == ["child"] and info["none"]["parents"] == []
    for mode in ("all", "previous"):  # the children of at most two kept parents
        assert len(info[mode]["parents"]) <= 2
        assert all(i.metadata["parent_id"] in info[mode]["parents"] for i in runs[mode].items)
    # all: the two parents lie in the one section kept; previous: they were searched among every section
    kept_all = rag.context.vectors.fetch("hierarchical", info["all"]["parents"])
    assert len({p.metadata["parent_id"] for p in kept_all}) == 1
    assert info["all"]["candidates_per_level"]["section"] == 1 and "section" not in info["previous"][
        "candidates_per_level"]
    # none: a flat search of the children, the dense strategy's over that level
    assert len({i.metadata["parent_id"] for i in runs["none"].items}) > 2
    none = rag.query(query, k=10, constrain_by="none", lane="dense", **HIER)
    flat = rag.query(query, strategy="dense", chunking="hierarchical", k=10, filters={"level": 3}, **NO_POST)
    assert [i.chunk_id for i in none.items] == [i.chunk_id for i in flat.items]


def test_hierarchical_score_threshold_per_level(rag, obliqa):
    query = obliqa.queries[2].text
    dense = {"lane": "dense", **HIER}  # cosine scores: the same for a chunk whatever else is retrieved
    sections = rag.query(query, k=10, output_level="section", **dense).items
    assert len(sections) >= 4
    floor = (sections[1].score + sections[2].score) / 2  # between the 2nd and 3rd best section
    plain = rag.query(query, k=10, **dense)
    floored = rag.query(query, k=10, score_threshold={"section": floor}, **dense)
    assert plain.metadata.details["hierarchical"]["candidates_per_level"]["section"] >= 3
    assert floored.metadata.details["hierarchical"]["candidates_per_level"]["section"] == 2
    # the output level's own floor
    child_floor = plain.items[2].score
    top = rag.query(query, k=10, score_threshold={"child": child_floor}, **dense)
    assert [i.chunk_id for i in top.items] == [i.chunk_id for i in plain.items[:3]]
    # a coarse level not named keeps min_score (the single floor of every level above the output)
    assert floored.metadata.details["hierarchical"]["candidates_per_level"]["parent_1024"] >= 1


# hybrid scores are >= 0, so the default floor (min_score 0) drops nothing; a cosine may be negative
@pytest.mark.parametrize("lane", [{"lane": "hybrid"}, {"lane": "dense", "min_score": -1.0}])
def test_hierarchical_level_kept_whole_is_fetched_not_ranked(rag, obliqa, monkeypatch, lane):
    """A level whose candidates all fit in its k is read by one unranked fetch: the same chunks kept, so the
    same answer as ranking them, down to the merges."""
    from ragloom.retrieval.hierarchical import HierarchicalRetriever

    wide = {**lane, "level_top_k": {"section": 3, "parent_1024": 200}, **HIER, "auto_merge": True}
    fetched = [rag.query(q.text, k=10, **wide) for q in obliqa.queries[:4]]
    assert all(r.metadata.details["hierarchical"]["kept_whole"] == ["parent_1024"] for r in fetched)
    monkeypatch.setattr(HierarchicalRetriever, "_all_children", lambda *a: None)  # rank every level
    monkeypatch.setattr(rag.context, "result_cache", None)  # the same query must run again
    ranked = [rag.query(q.text, k=10, **wide) for q in obliqa.queries[:4]]
    assert all("kept_whole" not in r.metadata.details["hierarchical"] for r in ranked)
    for a, b in zip(fetched, ranked, strict=True):
        assert [(i.chunk_id, i.score, i.metadata.get("merged_from")) for i in a.items] == \
               [(i.chunk_id, i.score, i.metadata.get("merged_from")) for i in b.items]
        assert set(a.metadata.details["hierarchical"]["parents"]) == set(b.metadata.details["hierarchical"]["parents"])
    monkeypatch.undo()
    # a floor that may drop candidates, or more candidates (the children of 3 sections) than k: ranked
    floored = rag.query(obliqa.queries[0].text, k=10, score_threshold={"parent_1024": 0.5}, **wide)
    dense_floor = rag.query(obliqa.queries[0].text, k=10, **{**wide, "lane": "dense", "min_score": 0.0})
    narrow = rag.query(obliqa.queries[0].text, k=10, **{**wide, "level_top_k": {"section": 3, "parent_1024": 1}})
    for result in (floored, narrow, dense_floor):
        assert "kept_whole" not in result.metadata.details["hierarchical"]
        assert result.metadata.details["hierarchical"]["levels_searched"] == ["section", "parent_1024", "child"]
