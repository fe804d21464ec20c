"""Retrieval on the real stores: every strategy on real data, graph_rag beating hybrid on 2-hop MuSiQue questions,
filters on the live server, fallbacks, post-processing, and scope isolation between tenants.

Each corpus goes into its own collections and graph namespace through the pipeline's sync functions (with the
shared embedding cache); the store factories drop them after the module and check nothing is left.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from ragloom.api import Ragloom
from ragloom.chunking import get_chunker
from ragloom.embedding import make_embedder
from ragloom.errors import EmbeddingError, FilterError, QueryError, RagloomError, RetrievalError, StoreError
from ragloom.evaluation.datasets import load_dataset
from ragloom.extraction import EntityExtractor, load_nlp
from ragloom.indexing.graph import sync_graph
from ragloom.indexing.vectors import sync_vectors
from ragloom.metadata import MetadataLayout
from ragloom.parsing import document_hash
from ragloom.settings import Settings
from ragloom.stores.embedding_cache import EmbeddingCache
from ragloom.stores.neo4j import Neo4jStore
from ragloom.stores.weaviate import WeaviateStore
from ragloom.types import Document, RetrievalResult, Scope

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
FLAT_STRATEGIES = ("dense", "bm25", "hybrid")
ALL_STRATEGIES = ("dense", "bm25", "hybrid", "graph_rag", "hierarchical")


# corpora -------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Corpus:
    settings: Settings
    vectors: WeaviateStore
    graph: Neo4jStore
    rag: Ragloom


@pytest.fixture(scope="module")
def models(settings: Settings):
    return make_embedder(settings), load_nlp(settings.spacy_model)


@pytest.fixture(scope="module")
def index(settings: Settings, models, module_weaviate_store_factory,
          module_neo4j_store_factory) -> Callable[..., Corpus]:
    """``index(name, documents, chunkings, graph_for=())``: the documents synced into collections and a graph
    namespace of their own (dropped, and checked gone, after the module)."""
    embedder, nlp = models

    def run(name: str, documents: list[Document], chunkings: tuple[str, ...],
            graph_for: tuple[str, ...] = ()) -> Corpus:
        tag = uuid.uuid4().hex[:8]
        vectors = module_weaviate_store_factory(f"TestRet{name}{tag}")
        vectors.metadata = MEMO_LAYOUT
        graph = module_neo4j_store_factory(f"test_ret_{tag}")
        ns = dataclasses.replace(settings, collection_prefix=vectors.prefix, graph_namespace=graph.namespace)
        cache = EmbeddingCache(settings.artifacts_dir / "embedding_cache")
        for chunking in chunkings:
            chunks = get_chunker(chunking).chunk_many(documents)
            sync_vectors(vectors, embedder, chunking, chunks, cache=cache)
            if chunking in graph_for:
                sync_graph(graph, EntityExtractor(nlp), chunking, chunks)
        # queries embedded as every API embeds them (backend auto: onnx-int8 on a CPU, whatever embedded the chunks)
        queries = make_embedder(settings, short_texts=True)
        return Corpus(ns, vectors, graph, Ragloom(ns, vectors=vectors, graph=graph, embedder=queries, nlp=nlp))

    return run


@pytest.fixture(scope="module")
def scifact():
    # 12 sampled claims, their gold abstracts and 200 others in all
    return load_dataset(DATA / "scifact", max_queries=12, corpus_limit=200, seed=13)


@pytest.fixture(scope="module")
def scifact_corpus(index, scifact) -> Corpus:
    return index("Scifact", scifact.documents, ("recursive", "hierarchical"))


# MuSiQue paragraphs come in blocks per question (its gold paragraphs and distractors); these ranges hold the
# blocks of 8 questions. The 2-hop cases below were found by running hybrid and graph_rag (Personalized PageRank,
# default options) over this subset.
MUSIQUE_RANGES = ((0, 60), (240, 280), (1300, 1340), (1640, 1680))
# the walk answers every query (gate and cap off): for tests of the walk itself
WALK_ALWAYS = {"max_named": 1000, "min_overlap": 0.0, "min_average_overlap": 0.0, "walk_slots": 1000}
GRAPH_BEATS_HYBRID = [  # (question, k, gold paragraph graph_rag reaches and hybrid misses)
    ("2hop__192622_62302", 10, "mq1657"),  # Peter Bonetti -> Chelsea -> the season's first goal
    ("2hop__192622_62302", 5, "mq1657"),
    ("2hop__704058_599261", 5, "mq1316"),  # Silverton -> Colorado -> Humboldt Peak's range
]


@pytest.fixture(scope="module")
def musique():
    return load_dataset(DATA / "musique").restricted_to(f"mq{i:04d}" for a, b in MUSIQUE_RANGES for i in range(a, b))


@pytest.fixture(scope="module")
def musique_corpus(index, musique) -> Corpus:
    return index("Musique", musique.documents, ("recursive",), graph_for=("recursive",))


OBLIQA_DOCUMENTS = ("32", "25", "16", "15")  # the four shortest rulebooks that have questions (6.7k-13.7k chars)


@pytest.fixture(scope="module")
def obliqa():
    return load_dataset(DATA / "obliqa").restricted_to(OBLIQA_DOCUMENTS)


@pytest.fixture(scope="module")
def obliqa_corpus(index, obliqa) -> Corpus:
    return index("Obliqa", obliqa.documents, ("hierarchical",))


def doc_ids(result: RetrievalResult) -> list[str]:
    return [i.document_id for i in result.items if i.rank > 0]


# every strategy finds relevant chunks ----------------------------------------------------------------------


@pytest.mark.parametrize("strategy, options", [
    ("dense", {}), ("bm25", {}), ("hybrid", {}), ("hybrid", {"fusion_type": "ranked", "alpha": 0.3}),
    ("hybrid", {"client_fusion": True}), ("hybrid", {"client_fusion": True, "fusion": "weighted"}),
    ("hierarchical", {}),
])
def test_each_strategy_finds_the_gold_abstracts_of_scifact_claims(scifact, scifact_corpus, strategy, options):
    hits = 0
    for query in scifact.queries:
        result = scifact_corpus.rag.query(query.text, strategy=strategy, k=5, abstain=False, **options)
        assert result.metadata.strategy == strategy and result.metadata.fallbacks == []
        hits += bool(set(doc_ids(result)) & set(scifact.qrels[query.query_id]))
    # 200 abstracts: chance is ~1 in 40 per query; full-corpus references put dense/bm25 nDCG@10 near 0.66
    # bm25 (stemmed, stopwords removed) finds 9-10 of these 12; on 100 SciFact claims its nDCG@10 is above the
    # unstemmed lane's (+0.024 [+0.001, +0.050], README "A stemmed BM25 lane"): 12 claims are a small sample
    assert hits >= (9 if strategy == "bm25" else 10), f"{strategy} {options}: gold abstract in the top 5 for {hits}/12"


def test_cli_query_prints_ranked_chunks_and_keeps_model_load_out_of_query_time(scifact, scifact_corpus, monkeypatch,
                                                                               capsys):
    from ragloom.cli import main

    monkeypatch.setenv("RAGLOOM_COLLECTION_PREFIX", scifact_corpus.settings.collection_prefix)
    monkeypatch.setenv("RAGLOOM_GRAPH_NAMESPACE", scifact_corpus.settings.graph_namespace)
    query = scifact.queries[0]
    assert main(["query", query.text, "--strategy", "hybrid", "-k", "5", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    timings = printed["metadata"]["timings_ms"]
    assert timings["connect_and_load"] > 0 and timings["total"] > 0
    assert "embed" in timings  # the query's own embedding is still timed, the model load is not
    # what the CLI prints is what the API answers (relevance itself: test_each_strategy_finds_the_gold_abstracts)
    api = scifact_corpus.rag.query(query.text, strategy="hybrid", k=5)
    assert [i["chunk_id"] for i in printed["items"]] == [i.chunk_id for i in api.items] != []
    assert main(["query", query.text, "--strategy", "dense", "-k", "3"]) == 0
    out = capsys.readouterr().out
    assert "strategy: dense" in out and "connect + model load before it:" in out and "\n 1. [" in out


def test_items_carry_what_callers_need(scifact, scifact_corpus):
    result = scifact_corpus.rag.query(scifact.queries[0].text, strategy="hybrid", k=5, client_fusion=True)
    meta = result.metadata.to_dict()
    assert meta["lanes_run"] == ["dense", "bm25"] and meta["chunking"] == "recursive"
    assert {"embed", "dense", "bm25", "fusion", "postprocess", "total"} <= set(meta["timings_ms"])
    assert [i.rank for i in result.items] == list(range(1, len(result.items) + 1))
    for item in result.items:
        assert item.chunk_id and item.document_id and item.text
        assert "vector" not in item.metadata and item.metadata["scope_path"] == "__shared__"
        assert set(item.lane_scores) <= {"dense", "bm25"} and item.lane_scores
    assert any(len(i.lane_scores) == 2 for i in result.items)  # found by both lanes, both scores kept


def test_graph_rag_finds_multi_hop_gold(musique, musique_corpus):
    found = walked = 0
    for query in musique.queries:
        result = musique_corpus.rag.query(query.text, strategy="graph_rag", k=10, abstain=False, lane_weight=0.0,
                                          require_named=True, **WALK_ALWAYS)
        walked += "graph" in result.metadata.lanes_run  # the others name no graph entity: the lane answers
        gold = set(musique.qrels[query.query_id])
        found += len(gold & set(doc_ids(result))) / len(gold)
    assert walked >= len(musique.queries) // 2
    assert found / len(musique.queries) >= 0.8  # recall@10 of all gold paragraphs, 8 questions


@pytest.mark.parametrize("question, k, gold", GRAPH_BEATS_HYBRID)
def test_graph_rag_reaches_a_gold_paragraph_hybrid_misses(musique, musique_corpus, question, k, gold):
    text = next(q.text for q in musique.queries if q.query_id == question)
    hybrid = musique_corpus.rag.query(text, strategy="hybrid", k=k, abstain=False)
    graph = musique_corpus.rag.query(text, strategy="graph_rag", k=k, abstain=False, lane_weight=0.0,
                                     **WALK_ALWAYS)  # the walk
    assert gold not in doc_ids(hybrid)
    assert gold in doc_ids(graph)
    reached = next(i for i in graph.items if i.document_id == gold)
    assert "graph" in reached.lane_scores  # it came through the graph lane
    assert graph.metadata.details["graph"]["seeds"] and graph.metadata.fallbacks == []


def test_graph_rag_prepends_the_visited_subgraph(musique, musique_corpus):
    result = musique_corpus.rag.query("Who scored the first goal of last season for Peter Bonetti's team?",
                                      strategy="graph_rag", k=5)
    context = result.items[0]
    assert context.metadata["source"] == "graph_rag" and context.rank == 0
    assert context.chunk_id.startswith("graph:")
    lines = context.text.splitlines()[1:]
    # one relation a line, each citing the chunk that states it (graph_context's text format)
    assert lines and all(" -[" in line and "]-> " in line and line.endswith("]") for line in lines)
    assert [i.rank for i in result.items[1:]] == list(range(1, len(result.items)))
    cited = {e["chunk_id"] for e in context.metadata["graph"]["edges"]}
    assert cited and all(f"[chunk {c}]" in context.text for c in cited)
    assert len({i.chunk_id for i in result.items}) == len(result.items)


def test_graph_rag_options_shape_the_walk_and_bad_values_are_refused(musique_corpus):
    text = "Who scored the first goal of last season for Peter Bonetti's team?"
    plain = musique_corpus.rag.query(text, strategy="graph_rag", k=10, abstain=False, lane_weight=0.0, **WALK_ALWAYS)
    assert plain.metadata.details["graph"]["named_in_query"] >= 1  # Peter Bonetti
    # passage seeds alone (no entity seed) would only smooth the vector lane: graph_rag says so and returns it
    lane_only = musique_corpus.rag.query(text, strategy="graph_rag", k=10, abstain=False, query_entities=False,
                                         seed_chunks=0, require_named=False)
    assert lane_only.metadata.fallbacks == ["graph_rag->hybrid: no seed entities in the graph for this query"]
    assert "graph" not in lane_only.metadata.lanes_run and doc_ids(lane_only)
    heavy = musique_corpus.rag.query(text, strategy="graph_rag", k=10, abstain=False, lane_weight=0.0,
                                     passage_weight=5.0, **WALK_ALWAYS)
    fused = musique_corpus.rag.query(text, strategy="graph_rag", k=10, abstain=False, lane_weight=2.0, **WALK_ALWAYS)
    assert doc_ids(fused) != doc_ids(plain)  # the vector lane's weight moves the walk's ranking
    assert doc_ids(heavy) != doc_ids(plain)  # the passage seeds' weight moves the ranking
    lane = musique_corpus.rag.query(text, strategy="hybrid", k=50, abstain=False, dedup=False)
    walk = {"k": 10, "abstain": False, "dedup": False, "graph_context": False, "lane_weight": 0.0, "max_seeds": 5,
            **WALK_ALWAYS}
    walked = musique_corpus.rag.query(text, strategy="graph_rag", lane_head=0, **walk)
    headed = musique_corpus.rag.query(text, strategy="graph_rag", lane_head=3, **walk)
    assert [i.chunk_id for i in headed.items[:3]] == [i.chunk_id for i in lane.items[:3]]  # the lane leads
    assert [i.chunk_id for i in walked.items[:3]] != [i.chunk_id for i in lane.items[:3]]
    rest = [i.chunk_id for i in walked.items if i.chunk_id not in {j.chunk_id for j in lane.items[:3]}]
    assert [i.chunk_id for i in headed.items[3:]] == rest[:7]  # then the walk's order
    for bad in ({"damping": 1.0}, {"passage_weight": -1}, {"vector_lane": "bm25"}, {"candidates": 0}):
        with pytest.raises(RetrievalError, match=next(iter(bad))):
            musique_corpus.rag.query(text, strategy="graph_rag", **bad)




def test_graph_rag_gate_and_slots_bound_how_far_the_walk_moves_the_lane(musique_corpus):
    # the walk runs on every query; by default it answers only when it re-ranks the lane rather than replacing
    # it, and places at most walk_slots chunks after the lane's head (ragloom.retrieval.walk_gate)
    text = "Who scored the first goal of last season for Peter Bonetti's team?"
    # graph_rag's lane fetches 50 candidates (hybrid's fusion normalises over what each lane returned)
    lane = [i.chunk_id for i in musique_corpus.rag.query(text, strategy="hybrid", k=50, abstain=False,
                                                         dedup=False).items][:10]
    base = {"k": 10, "abstain": False, "dedup": False, "graph_context": False}
    free = musique_corpus.rag.query(text, strategy="graph_rag", **base, **WALK_ALWAYS)
    signals = free.metadata.details["graph"]["signals"]
    assert free.metadata.details["graph"]["walked"] and signals["named"] >= 1
    moved = [i.chunk_id for i in free.items] != lane
    assert moved  # otherwise nothing below could tell the gate's answer from the walk's
    # a bound the query's signals fail: the lane's order answers, and the metadata says the walk did not
    assert 0.0 <= signals["average_overlap"] < 0.99
    for bound in ({"min_overlap": min(1.0, signals["overlap"] + 0.1)}, {"max_named": signals["named"] - 1},
                  {"min_average_overlap": signals["average_overlap"] + 0.01}):
        held = musique_corpus.rag.query(text, strategy="graph_rag", **base, **{**WALK_ALWAYS, **bound})
        assert [i.chunk_id for i in held.items] == lane, bound
        assert held.metadata.details["graph"]["walked"] is False and "graph" not in held.metadata.lanes_run
    # one slot: the lane's head, the walk's first chunk not in it, then the lane's own order
    one = musique_corpus.rag.query(text, strategy="graph_rag", **base, **{**WALK_ALWAYS, "walk_slots": 1})
    ids = [i.chunk_id for i in one.items]
    head = lane[:3]
    first_walked = next(c for c in (i.chunk_id for i in free.items) if c not in head)
    assert ids[:4] == [*head, first_walked]
    assert ids[4:] == [c for c in lane if c not in ids[:4]][: len(ids) - 4]

BONETTI = "Who scored the first goal of last season for Peter Bonetti's team?"


def test_multi_hop_requeries_with_a_bridge_the_best_hit_names(musique_corpus):
    hybrid = musique_corpus.rag.query(BONETTI, strategy="hybrid", k=5, abstain=False)
    first = musique_corpus.rag.query(BONETTI, strategy="multi_hop", k=5, abstain=False, max_rounds=1)
    assert doc_ids(first) == doc_ids(hybrid)  # one round is the lane alone
    two = musique_corpus.rag.query(BONETTI, strategy="multi_hop", k=5, abstain=False, bridges=1)
    # the best hit (Bonetti's own paragraph) names Putney, Chelsea, London...: Putney leads back to that same
    # paragraph only; Chelsea, named by other paragraphs, is the most specific bridge that leads elsewhere
    assert two.metadata.details["multi_hop"] == {"rounds": 2, "bridges": [["Chelsea"]]}
    assert two.metadata.fallbacks == [] and two.metadata.lanes_run == ["hybrid"]
    # the bridge query ("Chelsea ...") re-ranks the answer: since BM25 v3 what only it finds ranks under the
    # first round's best five, and inside the five it lifts a paragraph it ranks higher than the first round did
    assert doc_ids(two) != doc_ids(first), "the bridge round changed nothing"
    many = musique_corpus.rag.query(BONETTI, strategy="multi_hop", k=5, abstain=False, bridges=3)
    bridges = many.metadata.details["multi_hop"]["bridges"][0]
    assert len(bridges) == 3 and bridges[0] == "Chelsea"
    assert not any(b.lower() in BONETTI.lower() for b in bridges)  # never an entity the query names


def test_multi_hop_without_a_reachable_graph_answers_with_its_lane(models, musique_corpus):
    embedder, nlp = models
    unreachable = dataclasses.replace(musique_corpus.settings, neo4j_uri="bolt://127.0.0.1:1")
    with Ragloom(unreachable, vectors=musique_corpus.vectors, embedder=embedder, nlp=nlp) as rag:
        result = rag.query(BONETTI, strategy="multi_hop", k=5, abstain=False)
        hybrid = rag.query(BONETTI, strategy="hybrid", k=5, abstain=False)
    assert len(result.metadata.fallbacks) == 1
    assert result.metadata.fallbacks[0].startswith("multi_hop->hybrid: graph store unavailable")
    assert doc_ids(result) == doc_ids(hybrid)

# hierarchical ----------------------------------------------------------------------------------------------


def _overlaps_gold(item, passages) -> bool:
    start, end = item.metadata["start"], item.metadata["end"]
    return any(p.document_id == item.document_id and min(end, p.end) - max(start, p.start)
               >= 0.5 * min(end - start, p.end - p.start) for p in passages)


def test_hierarchical_goes_coarse_to_fine_and_finds_gold_passages(obliqa, obliqa_corpus):
    hits = 0
    for query in obliqa.queries:
        result = obliqa_corpus.rag.query(query.text, strategy="hierarchical", k=5, abstain=False, auto_merge=False)
        info = result.metadata.details["hierarchical"]
        assert result.metadata.fallbacks == [] and info["levels_searched"] == ["section", "parent_1024", "child"]
        assert info["output_level"] == "child"  # document, section, parent_1024, child: level 3
        assert all(i.metadata["level"] == 3 and i.metadata["parent_id"] in info["parents"] for i in result.items)
        gold = [obliqa.passages[p] for p in obliqa.passage_qrels.get(query.query_id, {})]
        hits += any(_overlaps_gold(i, gold) for i in result.items)
    assert hits >= 0.6 * len(obliqa.queries), f"{hits}/{len(obliqa.queries)}"


def test_auto_merge_returns_the_parent_of_enough_siblings(obliqa, obliqa_corpus):
    merged = []
    for query in obliqa.queries[:15]:
        result = obliqa_corpus.rag.query(query.text, strategy="hierarchical", k=10, abstain=False, dedup=False,
                                         merge_threshold=0.3)
        merged += [i for i in result.items if i.metadata.get("merged_from")]
    assert merged, "no query retrieved two siblings covering 30% of their parent"
    for parent in merged:
        children = obliqa_corpus.vectors.fetch("hierarchical", parent.metadata["merged_from"])
        assert len(children) >= 2 and {c.metadata["parent_id"] for c in children} == {parent.chunk_id}
        covered = sum(c.metadata["end"] - c.metadata["start"] for c in children)
        assert covered >= 0.3 * (parent.metadata["end"] - parent.metadata["start"])
        assert all(c.text in parent.text for c in children)


@pytest.mark.parametrize("mode, level", [("parent", 2), ("document", 0)])
def test_parent_and_document_expansion(obliqa, obliqa_corpus, mode, level):
    query = obliqa.queries[0].text
    options = {"abstain": False, "auto_merge": False, "dedup": False}
    plain = obliqa_corpus.rag.query(query, strategy="hierarchical", k=5, **options)
    expanded = obliqa_corpus.rag.query(query, strategy="hierarchical", k=5, expand=mode, **options)
    assert all(i.metadata["level"] == level for i in expanded.items)
    assert len({i.chunk_id for i in expanded.items}) == len(expanded.items)
    sources = [cid for i in expanded.items for cid in i.metadata["expanded_from"]]
    assert {i.chunk_id for i in plain.items} <= set(sources)
    for item in plain.items:  # each hit's text lies inside what replaced it
        holder = next(e for e in expanded.items if item.chunk_id in e.metadata["expanded_from"])
        assert item.text in holder.text


# fallbacks -------------------------------------------------------------------------------------------------


def test_unknown_strategy_is_an_error_unless_the_fallback_is_asked_for(scifact, scifact_corpus):
    with pytest.raises(QueryError, match="unknown retrieval strategy 'graphrag_typo'; choose from"):
        scifact_corpus.rag.query(scifact.queries[0].text, strategy="graphrag_typo", k=3)
    result = scifact_corpus.rag.query(scifact.queries[0].text, strategy="graphrag_typo", k=3, alpha=0.2,
                                      unknown_strategy="fallback")
    assert result.metadata.strategy == "dense" and result.metadata.requested_strategy == "graphrag_typo"
    assert "unknown retrieval strategy 'graphrag_typo'" in result.metadata.warnings[0]
    assert result.metadata.fallbacks == ["graphrag_typo->dense: unknown strategy"]
    assert result.items and result.metadata.lanes_run == ["dense"]


def _whole(result: RetrievalResult) -> list[tuple]:
    return [(i.chunk_id, i.document_id, i.text, i.score, i.rank, i.heading_path, i.lane_scores,
             json.dumps(i.metadata, sort_keys=True, default=str)) for i in result.items]


@pytest.mark.parametrize("options", [
    {"k": 10, **WALK_ALWAYS},  # the walk ranks; chunks the lane did not return are fetched
    {"k": 10},  # the default gate: lane head, walk slots, then the lane's order
    {"k": 5, "keep_vectors": True, "max_per_document": 1},  # vectors and metadata the post-processing reads
    {"k": 3, "require_named": True},  # a fallback: the lane answers
], ids=["walk", "gate", "vectors", "fallback"])
def test_graph_rag_reads_whole_the_chunks_its_ids_only_lane_returns(musique, musique_corpus, monkeypatch, options):
    """The lane asks for ids and scores only; what graph_rag returns is what it returned with the lane's whole
    chunks: the same items, texts, scores, ranks and metadata (vectors included)."""
    from ragloom.retrieval import graph_rag, lanes

    queries = [q.text for q in musique.queries[:6]] + ["what is it about?"]
    thin = [musique_corpus.rag.query(q, strategy="graph_rag", **options) for q in queries]
    run = lanes.run
    # the lane as before: whole chunks, returned as they came
    monkeypatch.setattr(lanes, "run", lambda *a, ids_only=False, **kw: run(*a, **kw))
    monkeypatch.setattr(graph_rag, "_read_whole", lambda request, items, ids: (items, len(items)))
    whole = [musique_corpus.rag.query(q, strategy="graph_rag", **options) for q in queries]
    assert [_whole(r) for r in thin] == [_whole(r) for r in whole]
    assert [r.metadata.fallbacks for r in thin] == [r.metadata.fallbacks for r in whole]
    assert all("lane_read" in r.metadata.timings_ms for r in thin if r.items)
    assert not any("lane_read" in r.metadata.timings_ms for r in whole)
    if options.get("keep_vectors"):
        assert all(len(i.metadata["vector"]) == 384 for r in thin for i in r.items if i.rank > 0)


def _checked_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """graph_rag as a filtered query runs it: the walk's chunks are fetched under the filters before the gate."""
    from ragloom.retrieval.base import SearchRequest

    monkeypatch.setattr(SearchRequest, "scope_only", lambda self: False)


def _walk_only(result: RetrievalResult) -> list[str]:
    """Chunks the walk placed that its vector lane did not return."""
    return [i.chunk_id for i in result.items
            if i.metadata.get("source") != "graph_rag" and "hybrid" not in i.lane_scores]


@pytest.mark.parametrize("options", [{"k": 10, **WALK_ALWAYS}, {"k": 10},
                                     {"k": 10, **WALK_ALWAYS, "lane_weight": 1.0}], ids=["walk", "gate", "rrf"])
def test_graph_rag_under_the_scope_alone_reads_the_store_once_after_its_lane(musique, musique_corpus, monkeypatch,
                                                                              options):
    """With no filter beyond the scope, the walk's chunks are read whole with the lane's in one fetch at the end:
    the answer is the one the checked path gives, to the text, score, rank and metadata."""
    queries = [q.text for q in musique.queries[:8]]
    one = [musique_corpus.rag.query(q, strategy="graph_rag", **options) for q in queries]
    with monkeypatch.context() as m:
        _checked_path(m)
        checked = [musique_corpus.rag.query(q, strategy="graph_rag", **options) for q in queries]
    # the walk ranked chunks its lane did not return (the checked path fetched them); without the lane's RRF
    # weight some of them reach the answer
    assert any("fetch" in r.metadata.timings_ms for r in checked)
    assert "lane_weight" in options or any(_walk_only(r) for r in one)
    assert all("fetch" not in r.metadata.timings_ms for r in one)
    assert [_whole(r) for r in one] == [_whole(r) for r in checked]


def test_graph_rag_a_chunk_the_store_lost_and_the_graph_still_holds_is_passed_over(musique, musique_corpus,
                                                                                   monkeypatch):
    """A delete the graph has not seen yet: the chunk the walk placed is not in the store's final read, so the
    query is ranked again on the checked path, and the next chunk takes its place."""
    rag, options = musique_corpus.rag, {"k": 10, **WALK_ALWAYS}
    query, lost = next((q.text, walked[0]) for q in musique.queries
                       if (walked := _walk_only(rag.query(q.text, strategy="graph_rag", **options))))
    store = rag.context.vectors
    fetch = store.fetch
    monkeypatch.setattr(store, "fetch", lambda strategy, ids, **kw: fetch(strategy, [c for c in ids if c != lost],
                                                                          **kw))
    after = rag.query(query, strategy="graph_rag", **options)
    with monkeypatch.context() as m:
        _checked_path(m)
        checked = rag.query(query, strategy="graph_rag", **options)
    assert lost not in [i.chunk_id for i in after.items] and len(after.items) == 11  # the context item and k chunks
    assert "fetch" in after.metadata.timings_ms  # the checked path answered
    assert _whole(after) == _whole(checked)


@pytest.mark.parametrize("threshold", [None, 0.6], ids=["default", "near-duplicates"])
def test_graph_rag_reads_the_first_k_whole_when_post_processing_keeps_them(musique, musique_corpus, monkeypatch,
                                                                            threshold):
    """The final read stops at the first k when de-duplication keeps them all, and reads the rest when it does
    not (a low threshold makes near-duplicates): the answer, context item included, is the one a read of every
    placed chunk gives."""
    from ragloom.retrieval import base, graph_rag

    rag = musique_corpus.rag
    options = {"k": 10, **({} if threshold is None else {"dedup_threshold": threshold})}
    queries = [q.text for q in musique.queries[:8]]
    reads: list[int] = []
    read = graph_rag._read
    monkeypatch.setattr(graph_rag, "_read", lambda request, items, thin: reads.append(len(items)) or
                        read(request, items, thin))
    lazy = [rag.query(q, strategy="graph_rag", **options) for q in queries]
    first_k = list(reads)
    with monkeypatch.context() as m:
        request = base.Retriever._request
        m.setattr(base.Retriever, "_request",
                  lambda self, *a: dataclasses.replace(request(self, *a), enough=None))
        every = [rag.query(q, strategy="graph_rag", **options) for q in queries]
    assert [_whole(r) for r in lazy] == [_whole(r) for r in every]
    assert all(r.items[0].metadata.get("source") == "graph_rag" for r in lazy)  # the context item is compared too
    if threshold is None:  # one read of the first k a query
        assert first_k == [10] * len(queries)
    else:  # near-duplicates among the first k: the rest read too
        assert len(first_k) > len(queries) and first_k[0] == 10
    assert len(reads) - len(first_k) == len(queries)  # without enough: one read of every placed chunk


def test_graph_rag_with_a_user_filter_fetches_the_walks_chunks_under_it(musique, musique_corpus):
    """A user filter the graph cannot see: the walk's chunks are fetched under it before they are placed."""
    results = [musique_corpus.rag.query(q.text, strategy="graph_rag", k=10, **WALK_ALWAYS,
                                        filters={"document_id": {"not": "no-such-document"}})
               for q in musique.queries[:8]]
    walked = [r for r in results if _walk_only(r)]
    assert walked and all("fetch" in r.metadata.timings_ms for r in walked)


def test_graph_rag_without_a_named_entity_answers_like_its_vector_lane(musique_corpus):
    # a query naming no graph entity: the hybrid lane already in flight answers (not re-run)
    result = musique_corpus.rag.query("what is it about?", strategy="graph_rag", k=3, abstain=False,
                                      require_named=True)
    assert result.metadata.fallbacks == ["graph_rag->hybrid: the query names no entity of the graph"]
    assert result.metadata.lanes_run == ["hybrid"] and result.items
    hybrid = musique_corpus.rag.query("what is it about?", strategy="hybrid", k=3, abstain=False)
    assert doc_ids(result)[0] == doc_ids(hybrid)[0]


def test_graph_rag_without_a_reachable_graph_falls_back_to_hybrid(settings, models, musique_corpus):
    embedder, nlp = models
    unreachable = dataclasses.replace(musique_corpus.settings, neo4j_uri="bolt://127.0.0.1:1")
    with Ragloom(unreachable, vectors=musique_corpus.vectors, embedder=embedder, nlp=nlp) as rag:
        result = rag.query("Who scored the first goal of last season for Peter Bonetti's team?",
                           strategy="graph_rag", k=3, abstain=False)
    assert len(result.metadata.fallbacks) == 1
    assert result.metadata.fallbacks[0].startswith("graph_rag->hybrid: graph store unavailable")
    assert result.items


def test_graph_rag_whose_graph_load_fails_answers_from_its_vector_lane(musique_corpus, models):
    # connected to the live server, but every read fails there (a database that does not exist): the snapshot
    # load raises mid-query, and the hybrid lane already in flight answers
    embedder, nlp = models
    failing = Neo4jStore(musique_corpus.graph.driver, musique_corpus.graph.namespace, database="ragloomnosuchdb")
    question = "Who scored the first goal of last season for Peter Bonetti's team?"
    with Ragloom(musique_corpus.settings, vectors=musique_corpus.vectors, graph=failing, embedder=embedder,
                 nlp=nlp) as rag:
        result = rag.query(question, strategy="graph_rag", k=3, abstain=False)
    assert len(result.metadata.fallbacks) == 1
    assert result.metadata.fallbacks[0].startswith("graph_rag->hybrid: graph store failed: neo4j (read")
    assert result.metadata.lanes_run == ["hybrid"] and "graph" not in result.metadata.details
    walked = musique_corpus.rag.query(question, strategy="graph_rag", k=3, abstain=False)
    assert walked.metadata.fallbacks == [] and "graph" in walked.metadata.details  # the same query walks
    hybrid = musique_corpus.rag.query(question, strategy="hybrid", k=3, abstain=False)
    assert doc_ids(result)[0] == doc_ids(hybrid)[0]


def test_in_the_services_mode_a_fallback_keeps_the_stores_words_to_the_log(musique_corpus, models, caplog):
    """The service returns results to tenants: a fallback there says what failed, and the store's own text (it
    names the database, the namespace, the host) goes to the log only (security model)."""
    embedder, nlp = models
    failing = Neo4jStore(musique_corpus.graph.driver, musique_corpus.graph.namespace, database="ragloomnosuchdb")
    unreachable = dataclasses.replace(musique_corpus.settings, neo4j_uri="bolt://127.0.0.1:1")
    question = "Who scored the first goal of last season for Peter Bonetti's team?"
    with caplog.at_level(logging.WARNING, logger="ragloom"):
        with Ragloom(musique_corpus.settings, vectors=musique_corpus.vectors, graph=failing, embedder=embedder,
                     nlp=nlp, hide_schema=True) as rag:
            failed = rag.query(question, strategy="graph_rag", k=3, abstain=False)
        with Ragloom(unreachable, vectors=musique_corpus.vectors, embedder=embedder, nlp=nlp,
                     hide_schema=True) as rag:
            down = rag.query(question, strategy="graph_rag", k=3, abstain=False)
    assert failed.metadata.fallbacks == [
        "graph_rag->hybrid: graph store failed: StoreError; details in the service log"]
    assert down.metadata.fallbacks == [
        "graph_rag->hybrid: graph store unavailable: StoreError; details in the service log"]
    assert failed.items and down.items
    logged = caplog.text
    assert "ragloomnosuchdb" in logged and "127.0.0.1:1" in logged, logged


class _BrokenEmbedder:
    model_id, dimension = "broken", 384

    def encode(self, texts):
        raise EmbeddingError("the embedding model crashed")


class _SearchesFail:
    """The real Weaviate store, except that its searches raise (fetching chunks by id still works)."""

    def __init__(self, store: WeaviateStore) -> None:
        self._store = store

    def __getattr__(self, name):
        if name in ("hybrid", "near_vector", "bm25"):
            def fail(*args, **kwargs):
                raise StoreError(f"weaviate {name}: connection reset")
            return fail
        return getattr(self._store, name)


def test_graph_rag_whose_embedder_fails_seeds_the_walk_from_bm25(musique_corpus, models):
    _, nlp = models
    with Ragloom(musique_corpus.settings, vectors=musique_corpus.vectors, graph=musique_corpus.graph,
                 embedder=_BrokenEmbedder(), nlp=nlp) as broken:
        result = broken.query(BONETTI, strategy="graph_rag", k=5, abstain=False, **WALK_ALWAYS)
    assert result.metadata.fallbacks == [
        "graph_rag: lane hybrid failed, bm25 seeds the walk: the embedding model crashed"]
    assert result.metadata.lanes_run == ["bm25", "graph"] and result.metadata.details["graph"]["passage_seeds"] > 0
    assert doc_ids(result)


def test_graph_rag_whose_vector_lane_fails_answers_from_the_walk(musique_corpus, models):
    embedder, nlp = models
    with Ragloom(musique_corpus.settings, vectors=_SearchesFail(musique_corpus.vectors),
                 graph=musique_corpus.graph, embedder=embedder, nlp=nlp) as failing:
        result = failing.query(BONETTI, strategy="graph_rag", k=5, abstain=False)
        assert len(result.metadata.fallbacks) == 1
        assert result.metadata.fallbacks[0].startswith("graph_rag: lane hybrid failed, the walk answers alone")
        graph_info = result.metadata.details["graph"]
        assert graph_info["passage_seeds"] == 0 and graph_info["named_in_query"] >= 1
        walked = [i for i in result.items if i.metadata.get("source") != "graph_rag"]
        assert walked and all("graph" in i.lane_scores for i in walked)  # fetched by id, ranked by the walk
        with pytest.raises(StoreError, match="every lane failed: vector lane: hybrid: .*connection reset"):
            failing.query("what is it about?", strategy="graph_rag", k=5, abstain=False)


def test_hierarchical_on_a_flat_collection_searches_flat(scifact, scifact_corpus):
    result = scifact_corpus.rag.query(scifact.queries[0].text, strategy="hierarchical", chunking="recursive", k=3)
    assert result.metadata.fallbacks[0].startswith("hierarchical->flat")
    assert result.items


# post-processing -------------------------------------------------------------------------------------------


def test_abstains_off_topic_but_answers_the_claims(scifact, scifact_corpus):
    off = scifact_corpus.rag.query("How do I bake sourdough bread at home?", strategy="hybrid", k=5)
    assert off.items == [] and off.metadata.abstained is True
    assert "below the sufficiency floor" in off.metadata.abstain_reason
    answered = [bool(scifact_corpus.rag.query(q.text, strategy="hybrid", k=5).items) for q in scifact.queries]
    assert sum(answered) >= 11


def test_context_assembly_cites_the_results(scifact, scifact_corpus):
    result = scifact_corpus.rag.query(scifact.queries[0].text, strategy="hybrid", k=5)
    text, citations = scifact_corpus.rag.context_text(result, token_budget=300)
    assert citations and text.startswith("[1] ")
    by_id = {i.chunk_id: i for i in result.items}
    for c in citations:
        assert by_id[c.chunk_id].document_id == c.document_id and f"[{c.number}] " in text


# scope isolation and filters (one small synthetic corpus) --------------------------------------------------

SCOPES = {
    "shared": Scope(),
    "acme": Scope("acme"),
    "alice": Scope("acme", "alice"),
    "alice_chat": Scope("acme", "alice", "c1"),
    "alice_agent": Scope("acme", "alice", "c1", "planner"),
    "bob": Scope("acme", "bob"),
    "acme_corp": Scope("acme-corp"),  # a tenant whose name extends another's
    "acme_alice": Scope("acme-alice"),  # a tenant named like a path below another
}


# the memos' keys compared by range are declared, as an operator would (RAGLOOM_METADATA_TYPES); status is text
MEMO_LAYOUT = MetadataLayout(declared={"year": "INT", "published": "DATE", "tags": "TEXT_ARRAY"})


def _doc(key: str, text: str, **metadata) -> Document:
    scope = SCOPES[key]
    title = f"Falcon memo {key}"
    return Document(document_id=f"memo-{key}", title=title, text=text, source_path=f"memos/{key}.md",
                    format="text", content_hash=document_hash(text, title, metadata, scope), metadata=metadata,
                    scope=scope)


SCOPE_DOCUMENTS = [
    _doc("shared", "Project Falcon is the company's satellite program. Falcon Industries builds the Falcon probe "
         "in Toulouse, and the European Space Agency reviews its budget every year.",
         status="published", year=2019, published="2019-05-01", tags=["space", "public"]),
    _doc("acme", "Acme Corporation joined Project Falcon in 2021. Maria Lopez leads the Falcon team at Acme in "
         "Madrid and reports the Falcon budget to the board.",
         status="published", year=2021, published="2021-02-10", tags=["space"]),
    _doc("alice", "Alice Moreau approved the Falcon budget of 12 million euros for Acme. She met Maria Lopez in "
         "Madrid to plan the Falcon launch with Orion Logistics.",
         status="draft", year=2022, published="2022-06-15", tags=["budget"]),
    _doc("alice_chat", "In chat c1 Alice asked whether the Falcon budget covers the launch insurance from Orion "
         "Logistics; the answer was yes.", status="draft", year=2023, published="2023-01-20"),
    _doc("alice_agent", "The planner agent drafted the Falcon launch schedule for Alice: integration in March, "
         "launch from Kourou in June.", status="draft", year=2023, published="2023-03-01"),
    _doc("bob", "Bob Keller secretly moved the Falcon budget to Zephyr Holdings in Zurich. Zephyr Holdings paid "
         "Bob Keller for the Falcon launch contract.", status="published", year=2022, published="2022-07-01",
         tags=["budget", "secret"]),
    _doc("acme_corp", "Acme Corp Limited cut the Falcon budget after Quentin Marsh reviewed the Falcon launch "
         "with Zephyr Holdings in Geneva.", status="published", year=2020, published="2020-09-09"),
    _doc("acme_alice", "Acme-Alice Consulting audited the Falcon budget for Ivo Petrov in Vienna.",
         status="published", year=2020, published="2020-11-11"),
]
DUPLICATE = dataclasses.replace(SCOPE_DOCUMENTS[0], document_id="memo-shared-copy", source_path="memos/copy.md")
FALCON_QUERIES = ["Who approved the Falcon budget?", "Zephyr Holdings and Bob Keller in Zurich",
                  "Where is the Falcon launch?"]


@pytest.fixture(scope="module")
def memos(index) -> Corpus:
    return index("Memos", [*SCOPE_DOCUMENTS, DUPLICATE], ("recursive", "hierarchical"), graph_for=("recursive",))


SECRETS = {"memo-bob": ("zephyr", "bob keller", "zurich"), "memo-acme_corp": ("zephyr", "quentin marsh", "geneva"),
           "memo-acme_alice": ("ivo petrov", "vienna"), "memo-alice": ("alice moreau",)}


def forbidden_names(scope: Scope) -> set[str]:
    """Names that appear only in documents this scope may not read."""
    allowed = visible_documents(scope)
    hidden = {n for doc, names in SECRETS.items() if doc not in allowed for n in names}
    return hidden - {n for doc, names in SECRETS.items() if doc in allowed for n in names}


def visible_documents(scope: Scope) -> set[str]:
    paths = set(scope.visible_paths())
    return {d.document_id for d in [*SCOPE_DOCUMENTS, DUPLICATE] if d.scope.path in paths}


@pytest.mark.parametrize("strategy", ALL_STRATEGIES)
@pytest.mark.parametrize("scope_key", list(SCOPES))
def test_a_scope_sees_itself_and_its_ancestors_never_a_sibling(memos, strategy, scope_key):
    scope = SCOPES[scope_key]
    allowed = visible_documents(scope)
    seen: set[str] = set()
    for query in FALCON_QUERIES:
        result = memos.rag.query(query, strategy=strategy, k=10, scope=scope, abstain=False, dedup=False)
        assert result.metadata.scope == scope.path
        returned = set(doc_ids(result))
        assert returned <= allowed, f"{strategy} in {scope.path!r} returned {sorted(returned - allowed)}"
        seen |= returned
        for item in result.items:  # chunks and the graph context item alike
            leaked = [name for name in forbidden_names(scope) if name in item.text.lower()]
            assert not leaked, f"{strategy} in {scope.path!r}: {item.chunk_id} names {leaked}"
    assert seen == allowed, f"{strategy} in {scope.path!r}: saw {sorted(seen)} of {sorted(allowed)}"


def test_the_scope_holds_under_adversarial_filters(memos):
    alice = SCOPES["alice"]
    allowed = visible_documents(alice)
    hostile = [
        {"document_id": "memo-bob"},
        {"document_id": ["memo-bob", "memo-acme_corp"]},
        {"not": {"document_id": "memo-alice"}},
        {"not": {"not": {"status": "published"}}},
        {"title": {"contains": "*"}},
        {"title": {"contains": ["bob", "Falcon memo b*"]}},
        {"source_path": {"contains": "memos/"}},
        {"tags": "secret"},
        '{"status": "published\\" OR scope_path = \\"acme/bob"}',
    ]
    for spec in hostile:
        for strategy in ALL_STRATEGIES:
            result = memos.rag.query("Falcon budget", strategy=strategy, k=10, scope=alice, filters=spec,
                                     abstain=False, dedup=False)
            assert set(doc_ids(result)) <= allowed, (spec, strategy, doc_ids(result))
    for spec in ({"scope_path": "acme/bob"}, {"scope_tenant": "acme"}, {"or": [{"document_id": "memo-bob"}]}):
        with pytest.raises(FilterError, match="scope|not supported"):
            memos.rag.query("Falcon budget", scope=alice, filters=spec)


def test_graph_lane_stays_in_scope(memos):
    # Zephyr Holdings is named only in bob's and acme-corp's memos. For alice it is not an entity at all:
    # it cannot be a seed, the walk never enters a chunk she may not read, and no sibling's name leaks
    # into the items, the context item or the metadata.
    alice = SCOPES["alice"]
    for options in ({"require_named": False}, {}):
        result = memos.rag.query("Zephyr Holdings", strategy="graph_rag", k=5, scope=alice, abstain=False, **options)
        assert set(doc_ids(result)) <= visible_documents(alice)
        assert not any(name in item.text.lower() for item in result.items for name in forbidden_names(alice))
        assert "zephyr" not in str(result.metadata).lower()
    named_nothing = memos.rag.query("Zephyr Holdings", strategy="graph_rag", k=5, scope=alice, abstain=False,
                                    require_named=True)
    assert named_nothing.metadata.fallbacks == ["graph_rag->hybrid: the query names no entity of the graph"]
    walked = memos.rag.query("Zephyr Holdings", strategy="graph_rag", k=5, scope=alice, abstain=False,
                             require_named=False, **WALK_ALWAYS)  # seeded from her own best chunks' entities
    assert "graph" in walked.metadata.lanes_run and "zephyr" not in str(walked.metadata).lower()
    bob = memos.rag.query("Zephyr Holdings", strategy="graph_rag", k=5, scope=SCOPES["bob"], abstain=False,
                          seed_chunks=0, **WALK_ALWAYS)
    assert "graph" in bob.metadata.lanes_run and doc_ids(bob)[0] == "memo-bob"
    assert "zephyr holdings" in [s.lower() for s in bob.metadata.details["graph"]["seeds"]]


def test_no_probability_mass_reaches_a_chunk_another_scope_holds(memos):
    # The walk over the real graph, seeded at every entity alice may see with equal weight: each chunk of a
    # document outside her scopes (memos that share entities such as Falcon with hers) gets exactly 0.
    import numpy as np

    from ragloom.retrieval import ppr
    from ragloom.retrieval.graph_index import GraphCache

    graph = GraphCache(memos.graph).get("recursive")
    alice = SCOPES["alice"]
    walk = graph.walk_matrix(alice.visible_paths())
    reset = np.concatenate([np.zeros(graph.n_chunks), walk.visible_entities.astype(float)])
    mass = ppr.personalized_pagerank(walk.transposed, walk.dangling, reset)
    allowed_paths = set(alice.visible_paths())
    hidden = [i for i in range(graph.n_chunks) if graph.scopes[graph.chunk_scope[i]] not in allowed_paths]
    assert hidden and walk.visible_chunks.sum() > 0
    assert all(mass[i] == 0.0 for i in hidden)
    assert mass[: graph.n_chunks].sum() > 0.1
    unscoped = graph.walk_matrix(None)  # the same seeds without the scope do reach them (the test can fail)
    free = ppr.personalized_pagerank(unscoped.transposed, unscoped.dangling, reset)
    assert sum(free[i] for i in hidden) > 0
    names = {graph.entity_names[e].lower() for e in np.flatnonzero(walk.visible_entities)}
    assert not names & forbidden_names(alice)


ALL_MEMOS = {d.document_id: d for d in [*SCOPE_DOCUMENTS, DUPLICATE]}


@pytest.mark.parametrize("spec, expected", [
    ({"status": "published"}, lambda m: m["status"] == "published"),
    ({"status": ["draft"]}, lambda m: m["status"] == "draft"),
    ({"year": {"gte": 2021, "lt": 2023}}, lambda m: 2021 <= m["year"] < 2023),
    ({"published": {"gt": "2022-01-01"}}, lambda m: m["published"] > "2022-01-01"),
    ({"published": "2021-02-10"}, lambda m: m["published"] == "2021-02-10"),
    ({"published": {"lte": "2021-02-10T00:00:00Z"}}, lambda m: m["published"] <= "2021-02-10"),
    ({"tags": "budget"}, lambda m: "budget" in m.get("tags", [])),
    ({"tags": {"contains": "pub"}}, lambda m: any("pub" in t for t in m.get("tags", []))),
    ({"not": {"status": "draft"}}, lambda m: m["status"] != "draft"),
    ({"status": {"not": "draft"}, "year": {"not": {"lt": 2021}}}, lambda m: m["status"] != "draft"
     and m["year"] >= 2021),
    ('{"year": [2019, 2023]}', lambda m: m["year"] in (2019, 2023)),
])
def test_filters_on_the_live_server(memos, spec, expected):
    everyone = Scope("acme", "alice", "c1", "planner")  # sees shared, acme, alice, her chat and agent
    allowed = visible_documents(everyone)
    want = {d for d in allowed if expected(ALL_MEMOS[d].metadata)}
    result = memos.rag.query("Falcon", strategy="dense", k=50, scope=everyone, filters=spec, abstain=False,
                             dedup=False)
    assert set(doc_ids(result)) == want


def test_title_contains_and_core_fields(memos):
    everyone = Scope("acme", "alice", "c1", "planner")
    result = memos.rag.query("Falcon", strategy="dense", k=50, scope=everyone, abstain=False, dedup=False,
                             filters={"title": {"contains": "memo alice"}})
    assert set(doc_ids(result)) == {"memo-alice", "memo-alice_chat", "memo-alice_agent"}
    assert doc_ids(memos.rag.query("Falcon", strategy="bm25", k=50, scope=everyone,
                                   filters={"title": {"contains": "Memo"}}, abstain=False)) == []  # case-sensitive
    result = memos.rag.query("Falcon", strategy="dense", k=50, scope=everyone, abstain=False, dedup=False,
                             filters={"document_id": "memo-acme", "level": 0})
    assert set(doc_ids(result)) == {"memo-acme"}


def test_invalid_filters_are_clear_errors_before_any_query(memos):
    for spec, field in (({"no_such_field": 1}, "no_such_field"), ({"year": "2021"}, "year"),
                        ({"published": {"gt": 5}}, "published"), ({"status": {"gte": 1}}, "status"),
                        ('{"year": ', "JSON")):
        with pytest.raises(FilterError, match=field):
            memos.rag.query("Falcon", strategy="hybrid", filters=spec)


def test_near_duplicates_are_removed(memos):
    query, alice = "Who builds the Falcon probe in Toulouse?", SCOPES["alice"]
    kept = memos.rag.query(query, strategy="dense", k=3, scope=alice, abstain=False)
    both = memos.rag.query(query, strategy="dense", k=3, scope=alice, abstain=False, dedup=False)
    assert {"memo-shared", "memo-shared-copy"} <= set(doc_ids(both))
    assert len({"memo-shared", "memo-shared-copy"} & set(doc_ids(kept))) == 1
    assert len(kept.metadata.details["duplicates_removed"]) >= 1 and len(kept.items) == 3


def test_api_from_settings_opens_and_closes_its_own_stores(memos):
    # make_embedder hands out the model the module already loaded (same settings): no second load
    with Ragloom.from_settings(memos.settings) as rag:
        result = rag.query("Who approved the Falcon budget?", strategy="graph_rag", k=3, scope="acme/alice")
        assert "graph" in result.metadata.lanes_run
        assert result.items and set(doc_ids(result)) <= visible_documents(SCOPES["alice"])
    with pytest.raises(RagloomError):
        rag.query("Falcon launch", strategy="dense", k=3)  # its Weaviate connection is closed


# the in-process graph follows the stored one ----------------------------------------------------------------

def _plain(key: str, text: str) -> Document:
    title = f"Harbor note {key}"
    return Document(document_id=key, title=title, text=text, source_path=f"notes/{key}.md", format="text",
                    content_hash=document_hash(text, title, {}, Scope()), metadata={}, scope=Scope())


HARBOR = [
    _plain("h1", "Harbor Lights is a lighthouse museum on the island of Vesteroy. Its collection opened in 1994."),
    _plain("h2", "Vesteroy is a small island whose ferry to the mainland leaves twice a day."),
]
HARBOR_LATER = _plain("h3", "Ingrid Solberg, the curator of Harbor Lights, was born in Tromso in 1961.")


def test_graph_rag_follows_an_ingest_and_a_deletion_without_a_restart(index, models):
    embedder, nlp = models
    question = "Where was the curator of Harbor Lights born?"

    def sync(corpus: Corpus, documents: list[Document]) -> None:
        chunks = get_chunker("recursive").chunk_many(documents)
        sync_vectors(corpus.vectors, embedder, "recursive", chunks)  # raises on failed objects
        sync_graph(corpus.graph, EntityExtractor(nlp), "recursive", chunks)

    corpus = index("Refresh", HARBOR, ("recursive",), graph_for=("recursive",))
    first = corpus.rag.query(question, strategy="graph_rag", k=5, abstain=False, dedup=False, **WALK_ALWAYS)
    assert "graph" in first.metadata.lanes_run and "h3" not in doc_ids(first)
    cache = next(v for k, v in corpus.rag.context.cache.items() if k[0] == "graph_index")
    h1_chunks = {c.chunk_id for c in get_chunker("recursive").chunk_many([HARBOR[0]])}
    assert h1_chunks <= set(cache.get("recursive").chunk_ids)
    sync(corpus, [*HARBOR, HARBOR_LATER])  # the same Ragloom object keeps answering
    second = corpus.rag.query(question, strategy="graph_rag", k=5, abstain=False, dedup=False, lane_head=0,
                              **WALK_ALWAYS)
    assert second.metadata.details["graph"]["graph_version"] != first.metadata.details["graph"]["graph_version"]
    assert second.metadata.details["graph"]["chunks"] == first.metadata.details["graph"]["chunks"] + 1
    reached = [i for i in second.items if i.document_id == "h3"]
    assert reached and reached[0].lane_scores["graph"] > 0
    sync(corpus, [HARBOR[1], HARBOR_LATER])  # h1 deleted
    third = corpus.rag.query(question, strategy="graph_rag", k=5, abstain=False, dedup=False, **WALK_ALWAYS)
    assert third.metadata.details["graph"]["chunks"] == second.metadata.details["graph"]["chunks"] - 1
    assert "h1" not in doc_ids(third)
    graph = cache.get("recursive")
    assert not h1_chunks & set(graph.chunk_ids)  # its nodes, and so its mass, are gone
    assert "vesteroy" in [n.lower() for n in graph.entity_names]  # still named by h2




