"""The adaptive strategy on the real stores (sample corpus in this module's own collections): the rule router
when no model is trained, corrective retry on a crafted weak query and none on a strong one, a chain that is
tried at most once per strategy, and a trained router artifact used at query time."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator

import numpy as np
import pytest

from ragloom.api import Ragloom
from ragloom.chunking import chunker_for
from ragloom.embedding import make_embedder
from ragloom.errors import RetrievalError
from ragloom.evaluation.routing_train import make_model
from ragloom.indexing.vectors import sync_vectors
from ragloom.parsing import parse_sources
from ragloom.retrieval.adaptive import query_features
from ragloom.retrieval.routing import FEATURE_NAMES, LearnedRouter
from ragloom.retrieval.routing.features import FORM_NAMES
from ragloom.settings import SAMPLE_CORPUS
from ragloom.stores.embedding_cache import EmbeddingCache

STRONG = ("The Halifax Harbour Trust manages pilotage and traffic in Halifax Harbour; Corvane installed twelve "
          "TideLens Harbour buoys in Project Beacon")
WEAK = "zyxqwv plorbination kwemblatz frondulous"  # words in no document: low cosine, no term coverage


@pytest.fixture(scope="module")
def rag(settings, tmp_path_factory, module_weaviate_store_factory) -> Iterator[Ragloom]:
    tag = uuid.uuid4().hex[:8]
    vectors = module_weaviate_store_factory(f"TestAdapt{tag}")
    ns = dataclasses.replace(settings, collection_prefix=vectors.prefix, graph_namespace=f"test_adapt_{tag}",
                             artifacts_path=tmp_path_factory.mktemp("artifacts"))
    documents = parse_sources([SAMPLE_CORPUS], SAMPLE_CORPUS).documents
    embedder = make_embedder(settings)
    chunks = chunker_for("recursive", embedder).chunk_many(documents)
    sync_vectors(vectors, embedder, "recursive", chunks, cache=EmbeddingCache(settings.artifacts_dir /
                                                                              "embedding_cache"))
    with Ragloom(ns, vectors=vectors, embedder=embedder) as rag:
        yield rag


def _adaptive(result):
    return result.metadata.details["adaptive"]


def test_strong_query_is_not_retried_and_rules_route_without_a_model(rag, tmp_path):
    # the module's artifacts folder holds no trained router (RAGLOOM_ROUTER_MODEL names a file that is not there)
    result = rag.query(STRONG, strategy="adaptive", k=5, rerank=False)
    info = _adaptive(result)
    assert info["route"]["router"] == "rules" and "no usable trained router" in info["route"]["note"]
    assert len(info["tries"]) == 1 and not info["retried"] and info["tries"][0]["weak"] == []
    assert info["used"] == info["route"]["strategy"]
    assert result.items and "halifax" in result.items[0].document_id.lower() + result.items[0].text.lower()
    # the rules read the query's form only: the route stage fetched no lane signals for them
    assert set(info["route"]["features"]) == set(FORM_NAMES)
    assert "route" in result.metadata.timings_ms


def test_weak_query_is_retried_with_the_next_strategy(rag, tmp_path):
    result = rag.query(WEAK, strategy="adaptive", k=5, router="rules", chain=["hybrid", "dense", "bm25"],
                       max_retries=1, abstain=False, rerank=False)
    info = _adaptive(result)
    assert info["retried"] and len(info["tries"]) == 2
    first, second = info["tries"]
    assert first["strategy"] == info["route"]["strategy"] and second["strategy"] != first["strategy"]
    assert any("cosine" in why for why in first["weak"])
    assert not any("coverage" in why for why in first["weak"])  # off by default
    assert info["used"] in (first["strategy"], second["strategy"])
    covered = _adaptive(rag.query(WEAK, strategy="adaptive", k=5, router="rules", chain=["hybrid", "dense"],
                                  max_retries=1, min_cosine=0, min_coverage=0.5, abstain=False, rerank=False))
    assert covered["retried"] and any("coverage" in why for why in covered["tries"][0]["weak"])


def test_chain_is_tried_at_most_once_per_strategy(rag):
    # every result is "weak" at min_cosine=1: retries stop when the chain is exhausted, never looping
    result = rag.query(STRONG, strategy="adaptive", k=5, router="rules", chain=["dense", "bm25", "hybrid"],
                       max_retries=5, min_cosine=1.0, rerank=False)
    tried = [t["strategy"] for t in _adaptive(result)["tries"]]
    assert sorted(tried) == ["bm25", "dense", "hybrid"] and all(t["weak"] for t in _adaptive(result)["tries"])
    none = rag.query(STRONG, strategy="adaptive", k=5, router="rules", chain=["dense", "bm25"], max_retries=0,
                     min_cosine=1.0, rerank=False)
    assert len(_adaptive(none)["tries"]) == 1


def test_a_trained_router_routes_queries(rag, tmp_path):
    # a model trained to prefer bm25 for every query: the learned router must follow it
    X = np.stack([query_features(rag.context, "recursive", q) for q in (STRONG, WEAK, "TideLens buoys")] * 5)
    Y = np.tile([[0.1, 0.9, 0.2]], (len(X), 1))
    trained = dataclasses.replace(rag.settings, artifacts_path=tmp_path / "trained")
    LearnedRouter(make_model(0).fit(X, Y), ["dense", "bm25", "hybrid"]).save(trained.resolved_router_model)
    with Ragloom(trained, vectors=rag.context.vectors, embedder=rag.context.embedder) as routed:
        result = routed.query("Who leads Field Operations?", strategy="adaptive", k=5, router="learned",
                              rerank=False)
    assert _adaptive(result)["route"]["router"] == "learned" and _adaptive(result)["route"]["strategy"] == "bm25"
    assert set(_adaptive(result)["route"]["features"]) == set(FEATURE_NAMES)  # the model reads the lane signals
    with pytest.raises(RetrievalError, match="no trained router at RAGLOOM_ROUTER_MODEL"):
        rag.query("x", strategy="adaptive", router="learned")


def test_llm_router_choice_stays_within_the_chain(rag, llm_settings):
    # the local llama-server (a small base model): whatever it answers, the route names a strategy of the chain,
    # chosen by the model or, when its answer names none, by the rules with the reason recorded
    from ragloom.errors import RagloomError
    from ragloom.llm import LLMClient
    from ragloom.retrieval import available_strategies, strategy_class
    from ragloom.retrieval.routing import LLMRouter

    summaries = {name: strategy_class(name).summary for name in available_strategies()}
    with LLMClient.from_settings(llm_settings) as client:
        try:
            chosen, why = LLMRouter(client, summaries).route(STRONG, np.zeros(len(FEATURE_NAMES)), ["dense", "bm25"])
            assert chosen in ("dense", "bm25") and why.startswith("llm")
        except RagloomError as e:
            assert "not one of" in str(e) or "expected" in str(e) or "LLM" in type(e).__name__
    result = rag.query(STRONG, strategy="adaptive", k=5, router="llm", chain=["dense", "bm25"], rerank=False)
    route = _adaptive(result)["route"]
    assert route["strategy"] in ("dense", "bm25")
    assert route["router"] == "llm" or "llm router failed" in route["note"]


def test_query_job_reports_the_strategy_mix_and_retry_rate(rag, tmp_path):
    # one strong query (not retried) and one weak (retried once): the run's metadata counts exactly that
    from pipelines.query import query_job
    from resources import ArtifactStore, EmbedderResource, Neo4jResource, NlpResource, WeaviateResource

    queries = tmp_path / "queries.txt"
    queries.write_text(f"{STRONG}\n{WEAK}\n")
    s = rag.settings
    resources = {"artifacts": ArtifactStore(base_dir=str(tmp_path)),
                 "weaviate": WeaviateResource(collection_prefix=s.collection_prefix, api_key=s.weaviate_api_key),
                 "neo4j": Neo4jResource(namespace=s.graph_namespace, password=s.neo4j_password),
                 "embedder": EmbedderResource(), "nlp": NlpResource()}
    config = {"queries_file": str(queries), "strategy": "adaptive", "k": 5,
              "options": {"router": "rules", "chain": ["hybrid", "dense", "bm25"], "max_retries": 1,
                          "abstain": False, "rerank": False}}
    result = query_job.execute_in_process(run_config={"ops": {"run_queries": {"config": config}}},
                                          resources=resources)
    assert result.success
    [materialization] = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    metadata = materialization.event_specific_data.metadata
    counts = metadata["adaptive"].data
    expected = [rag.query(q, strategy="adaptive", k=5, router="rules", chain=["hybrid", "dense", "bm25"],
                          max_retries=1, abstain=False, rerank=False).metadata.details["adaptive"]
                for q in (STRONG, WEAK)]
    assert counts["queries"] == 2 and counts["retried"] == 1 and counts["retries"] == 1
    assert metadata["adaptive_retry_rate"].value == 0.5
    routed = [e["route"]["strategy"] for e in expected]
    assert counts["routed"] == {s: routed.count(s) for s in set(routed)}
    assert sum(counts["used"].values()) == 2
    assert all(t["documents"] for e in expected for t in e["tries"])  # each try's documents, for evaluation
