"""multi_hop's LLM hops against the real local llama-server (Gemma 3 270M, `ragloom stack up --llm`), Weaviate and
Neo4j (the sample corpus in this module's own collections and graph namespace): the follow-up query is generated,
searched, fused and recorded; without a model the hops are off; a server that is down degrades to the bridge
rounds with a fallbacks entry. The model is a tiny base model: no assertion on the quality of its queries."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator

import pytest
from polling import free_port

from ragloom.api import Ragloom
from ragloom.chunking import chunker_for
from ragloom.embedding import make_embedder
from ragloom.extraction import EntityExtractor, load_nlp
from ragloom.indexing.graph import sync_graph
from ragloom.indexing.vectors import sync_vectors
from ragloom.llm import LLMClient
from ragloom.parsing import parse_sources
from ragloom.settings import SAMPLE_CORPUS, Settings
from ragloom.stores.embedding_cache import EmbeddingCache

QUESTION = "Who leads the team that owns the HarborSight platform?"
OPTIONS = {"k": 10, "max_rounds": 2, "abstain": False, "rerank": False}


@pytest.fixture(scope="module")
def indexed(llm_settings: Settings, module_weaviate_store_factory, module_neo4j_store_factory) -> Iterator[dict]:
    tag = uuid.uuid4().hex[:8]
    vectors, graph = module_weaviate_store_factory(f"TestHopLLM{tag}"), module_neo4j_store_factory(f"test_hop_{tag}")
    settings = dataclasses.replace(llm_settings, collection_prefix=vectors.prefix, graph_namespace=graph.namespace,
                                   llm_max_tokens=96)
    documents = parse_sources([SAMPLE_CORPUS], SAMPLE_CORPUS).documents
    embedder, nlp = make_embedder(settings), load_nlp(settings.spacy_model)
    chunks = chunker_for("recursive", embedder).chunk_many(documents)
    sync_vectors(vectors, embedder, "recursive", chunks, cache=EmbeddingCache(settings.artifacts_dir /
                                                                              "embedding_cache"))
    sync_graph(graph, EntityExtractor(nlp), "recursive", chunks)
    yield {"settings": settings, "vectors": vectors, "graph": graph, "embedder": embedder, "nlp": nlp}


def _rag(indexed: dict, llm: object = "settings") -> Ragloom:
    parts = {k: indexed[k] for k in ("vectors", "graph", "embedder", "nlp")}
    if llm == "settings":
        return Ragloom(indexed["settings"], **parts)
    return Ragloom(indexed["settings"], llm=llm, **parts)


def test_follow_up_query_is_generated_searched_and_recorded(indexed):
    with _rag(indexed) as rag:
        assert rag.llm is not None
        result = rag.query(QUESTION, strategy="multi_hop", max_hops=1, **OPTIONS)
    info = result.metadata.details["multi_hop"]
    assert info["rounds"] == 2 and info["bridges"]  # the bridge rounds ran as well: the hops compose with them
    [hop] = info["follow_ups"] if info["follow_ups"] else pytest.fail(
        f"no follow-up: {info.get('follow_up_stop')}; {result.metadata['fallbacks']}")
    assert hop["query"].strip() and hop["query"].lower() != QUESTION.lower()
    assert hop["tokens_in"] > 0 and hop["tokens_out"] > 0 and hop["results"] > 0
    lane = f"hop 1: {hop['query']}"
    assert any(lane in item.lane_scores for item in result.items)  # its results were fused into the answer
    assert "follow_up" in result.metadata.timings_ms and not result.metadata.fallbacks


def test_hops_are_off_without_a_model_or_at_zero(indexed):
    with _rag(indexed, llm=None) as rag:
        result = rag.query(QUESTION, strategy="multi_hop", max_hops=2, **OPTIONS)
    assert "follow_ups" not in result.metadata.details["multi_hop"] and "follow_up" not in result.metadata.timings_ms
    with _rag(indexed) as rag:
        off = rag.query(QUESTION, strategy="multi_hop", max_hops=0, **OPTIONS)
    assert "follow_ups" not in off.metadata.details["multi_hop"]
    assert [i.chunk_id for i in off.items] == [i.chunk_id for i in result.items]  # no model, no hop: the same


def test_server_down_degrades_to_the_bridge_rounds_with_a_fallback(indexed):
    down = LLMClient(f"http://127.0.0.1:{free_port()}/v1", max_retries=0, timeout=5)
    with _rag(indexed) as rag:
        plain = rag.query(QUESTION, strategy="multi_hop", max_hops=0, **OPTIONS)
    with down, _rag(indexed, llm=down) as rag:
        result = rag.query(QUESTION, strategy="multi_hop", max_hops=2, **OPTIONS)
    info = result.metadata.details["multi_hop"]
    assert info["follow_ups"] == [] and info["follow_up_stop"] == "hop 1: the model failed"
    assert any(f.startswith("multi_hop follow-up 1: LLMUnavailableError") for f in result.metadata.fallbacks)
    assert [i.chunk_id for i in result.items] == [i.chunk_id for i in plain.items]
