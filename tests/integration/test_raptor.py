"""RAPTOR-lite on the real stores (the sample corpus in this module's own collections): the summary level is
built extractively, rebuilt only for changed sections, searched by the `raptor` strategy (sections first, their
chunks re-scored, mixed with direct matches), and written by the real local llama-server when one is given
(a server that is down leaves extractive summaries, counted)."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from dagster import AssetKey
from polling import free_port

from ragloom.api import Ragloom
from ragloom.chunking import chunker_for
from ragloom.embedding import make_embedder
from ragloom.indexing.summaries import group_sections, load_state, summary_collection, sync_summaries
from ragloom.indexing.vectors import sync_vectors
from ragloom.llm import LLMClient
from ragloom.parsing import parse_sources
from ragloom.settings import SAMPLE_CORPUS
from ragloom.stores.embedding_cache import EmbeddingCache

QUESTION = "Who leads the team that owns the HarborSight platform?"


@pytest.fixture(scope="module")
def built(settings, tmp_path_factory, module_weaviate_store_factory):
    vectors = module_weaviate_store_factory(f"TestRaptor{uuid.uuid4().hex[:8]}")
    ns = dataclasses.replace(settings, collection_prefix=vectors.prefix)
    documents = parse_sources([SAMPLE_CORPUS], SAMPLE_CORPUS).documents
    embedder = make_embedder(settings)
    cache = EmbeddingCache(settings.artifacts_dir / "embedding_cache")
    chunks = chunker_for("recursive", embedder).chunk_many(documents)
    sync_vectors(vectors, embedder, "recursive", chunks, cache=cache)
    state = tmp_path_factory.mktemp("summaries") / "recursive.json"
    report = sync_summaries(vectors, embedder, "recursive", chunks, state, cache=cache, budget_tokens=40)
    return dataclasses.make_dataclass("Built", ["settings", "vectors", "embedder", "cache", "documents", "chunks",
                                                "state", "report"])(ns, vectors, embedder, cache, documents, chunks,
                                                                    state, report)


def test_summary_level_holds_one_summary_per_section_within_budget(built):
    report, vectors = built.report, built.vectors
    sections = group_sections(built.chunks)
    assert report.sections == len(sections) > 0 and report.built == report.sections and report.reused == 0
    assert report.method == "extractive" and 0 < report.summary_tokens <= 40 * report.sections
    stored = vectors.chunk_index(summary_collection("recursive"))
    assert len(stored) == report.sync["collection_size"] == sum(1 for s in load_state(built.state).values() if s.text)
    assert all(s.tokens <= 40 for s in load_state(built.state).values())


def test_only_changed_sections_are_rebuilt(built, tmp_path):
    state = tmp_path / "state.json"
    state.write_bytes(built.state.read_bytes())
    again = sync_summaries(built.vectors, built.embedder, "recursive", built.chunks, state, cache=built.cache,
                           budget_tokens=40)
    assert again.built == 0 and again.sync["inserted"] == 0 and again.sync["deleted"] == 0
    doc = built.documents[0]
    edited = dataclasses.replace(doc, text=doc.text + "\n\nA late addendum: the harbour buoys were recalibrated.")
    chunks = chunker_for("recursive", built.embedder).chunk_many([edited, *built.documents[1:]])
    before = {(s.key, s.content_hash) for s in group_sections(built.chunks)}
    changed = {s.key for s in group_sections(chunks) if (s.key, s.content_hash) not in before}
    third = sync_summaries(built.vectors, built.embedder, "recursive", chunks, state, cache=built.cache,
                           budget_tokens=40)
    assert 0 < third.built == len(changed) < third.sections
    assert all(key.startswith(doc.document_id) for key in changed)
    # put the module's corpus back for the other tests
    sync_summaries(built.vectors, built.embedder, "recursive", built.chunks, state, cache=built.cache,
                   budget_tokens=40)


def test_raptor_searches_sections_first_then_mixes_direct_matches(built):
    with Ragloom(built.settings, vectors=built.vectors, embedder=built.embedder, llm=None) as rag:
        result = rag.query(QUESTION, strategy="raptor", k=5, abstain=False, rerank=False)
        info = result.metadata.details["raptor"]
        assert info["sections"] and all(info["sections"]) and info["section_chunks"] >= len(info["sections"])
        assert info["rescored"] > 0 and not result.metadata.fallbacks
        assert any("sections" in i.lane_scores for i in result.items)
        assert "HarborSight" in " ".join(i.text for i in result.items)
        # a chunking indexed without its summary level: the direct matches answer, and fallbacks says why
        sync_vectors(built.vectors, built.embedder, "headered",
                     chunker_for("headered", built.embedder).chunk_many(built.documents[:2]), cache=built.cache)
        plain = rag.query(QUESTION, strategy="raptor", k=5, chunking="headered", abstain=False, rerank=False)
    assert "raptor" not in plain.metadata.details and plain.items
    assert any("no summary level for 'headered'" in f for f in plain.metadata.fallbacks)


def test_llm_summaries_and_a_server_that_is_down(built, llm_settings, tmp_path):
    few = [c for c in built.chunks if c.document_id == built.documents[0].document_id]
    down = LLMClient(f"http://127.0.0.1:{free_port()}/v1", max_retries=0, timeout=5)
    with down:
        failed = sync_summaries(built.vectors, built.embedder, "llmtest", few, tmp_path / "down.json",
                                cache=built.cache, llm=down, budget_tokens=30)
    assert failed.llm_failures == failed.built == failed.sections > 0
    assert {s.method for s in load_state(tmp_path / "down.json").values()} == {"extractive"}
    with LLMClient.from_settings(llm_settings) as client:
        written = sync_summaries(built.vectors, built.embedder, "llmtest", few, tmp_path / "down.json",
                                 cache=built.cache, llm=client, budget_tokens=30)
    summaries = load_state(tmp_path / "down.json").values()
    assert written.built == written.sections  # the extractive stand-ins are replaced once the model answers
    assert written.method.startswith("llm:") and written.llm_failures == 0
    assert all(s.method == written.method and 0 < s.tokens <= 30 for s in summaries)


def test_summary_asset_builds_then_rebuilds_only_changed_sections(settings, weaviate_store_factory, namespace,
                                                                  tmp_path):
    import shutil

    from pipelines.definitions import build_defs
    from resources import (
        ArtifactStore,
        CorpusResource,
        EmbedderResource,
        Neo4jResource,
        NlpResource,
        ParquetIOManager,
        WeaviateResource,
    )

    docs = tmp_path / "docs"
    shutil.copytree(SAMPLE_CORPUS, docs)
    store = weaviate_store_factory(namespace)
    settings = dataclasses.replace(settings, chunkings=("recursive",), graph_chunkings=(),
                                   summary_chunkings=("recursive",), summary_mode="extractive")
    artifacts = ArtifactStore(base_dir=str(tmp_path / "artifacts"))
    defs = build_defs(settings, {
        "corpus": CorpusResource(docs_dir=str(docs), uploads_dir=str(tmp_path / "uploads")), "artifacts": artifacts,
        "io_manager": ParquetIOManager(base_dir=artifacts.base_dir), "embedder": EmbedderResource(),
        "nlp": NlpResource(),
        "weaviate": WeaviateResource(collection_prefix=namespace, api_key=settings.weaviate_api_key),
        "neo4j": Neo4jResource(namespace=namespace, password=settings.neo4j_password)})
    assert defs.resolve_asset_graph().get(AssetKey("summaries_recursive")).pools == {"weaviate"}  # no model: no llm

    def run() -> dict:
        result = defs.resolve_job_def("ingest_job").execute_in_process(raise_on_error=True)
        [event] = [e for e in result.get_asset_materialization_events()
                   if e.asset_key.to_user_string() == "summaries_recursive"]
        return {k: v.value for k, v in event.event_specific_data.materialization.metadata.items()}

    first = run()
    assert first["built"] == first["sections"] > 0 and first["method"] == "extractive"
    assert store.count("recursive_summaries") == first["sync_collection_size"] > 0
    again = run()
    assert again["built"] == 0 and again["sync_inserted"] == 0 and again["reused"] == first["sections"]
    teams = docs / "company" / "teams.md"
    teams.write_text(teams.read_text().replace("Rafael Moreno", "Ingrid Solberg"))
    edited = run()
    assert 0 < edited["built"] < edited["sections"] and edited["sync_inserted"] == edited["built"]


def test_eval_builds_the_summary_level_and_reports_adaptive_routing(settings, namespace, tmp_path):
    # ragloom eval with raptor builds the summary level of the chunking it ingests (so raptor never falls back),
    # and with adaptive reports its strategy mix and retries, judged against the qrels
    from pathlib import Path

    from ragloom.evaluation import evaluate
    from ragloom.evaluation.runner import drop_namespace

    scifact = Path(__file__).resolve().parents[3] / "shared" / "data" / "scifact"
    settings = dataclasses.replace(settings, artifacts_path=tmp_path / "artifacts")
    try:
        report = evaluate(str(scifact), ["raptor", "adaptive"], ["recursive"], settings, namespace=namespace,
                          max_queries=8, corpus_limit=40, resamples=50, baselines=False, log=lambda _: None,
                          query_options={"router": "rules", "min_cosine": 0.6})
        ingest = report.ingest["recursive"]
        assert ingest["summary_sections"] > 0 and ingest["summaries_built"] == ingest["summary_sections"]
        assert ingest["summary_method"] == "extractive"
        systems = {s.name: s for s in report.systems}
        assert not systems["raptor/recursive"].error and systems["raptor/recursive"].query_errors == 0
        counts = systems["adaptive/recursive"].adaptive
        assert counts["queries"] == 8 and sum(counts["routed"].values()) == 8 and sum(counts["used"].values()) == 8
        assert counts["retried"] > 0 and counts["retries_judged"] == counts["retried"]  # min_cosine 0.6: some retry
        assert counts["retry_improved"] + counts["retry_worsened"] <= counts["retries_judged"]
        assert "adaptive/recursive: routed" in report.table() and report.to_json()["adaptive"]
    finally:
        drop_namespace(settings, "scifact", namespace)
