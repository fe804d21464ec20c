"""The LLM layer end to end against the real local llama-server (Gemma 3 270M, `ragloom stack up --llm`) and the
real Weaviate: every transform, `ask` with every generation strategy, abstention without a model call, the
answer cache (hit, and a miss after a re-ingest changes a passage), the server down, bounded timeouts.

The model is a tiny base model: these tests check protocol and structure, never answer quality.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from pathlib import Path

import pytest
from polling import free_port

from ragloom.api import Ragloom
from ragloom.chunking import get_chunker
from ragloom.embedding import make_embedder
from ragloom.errors import LLMTimeoutError, LLMUnavailableError
from ragloom.evaluation.datasets import load_dataset
from ragloom.indexing.vectors import sync_vectors
from ragloom.llm import LLMClient, available_transforms
from ragloom.parsing import document_hash
from ragloom.settings import Settings
from ragloom.stores.weaviate import WeaviateStore
from ragloom.types import Document

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
TRANSFORMS = ("reformulate", "multi_query", "hyde", "step_back", "decompose", "prf")


@dataclasses.dataclass
class Indexed:
    settings: Settings
    vectors: WeaviateStore
    embedder: object
    documents: list[Document]
    questions: list[str]

    def reindex(self, documents: list[Document]) -> None:
        chunks = get_chunker("recursive").chunk_many(documents)
        assert sync_vectors(self.vectors, self.embedder, "recursive", chunks).collection_size == len(chunks)

    def rag(self, data_dir: Path, llm: LLMClient | None | object = "settings", **changes: object) -> Ragloom:
        settings = dataclasses.replace(self.settings, data_dir=data_dir, **changes)
        if llm == "settings":
            return Ragloom(settings, vectors=self.vectors, embedder=self.embedder)
        return Ragloom(settings, vectors=self.vectors, embedder=self.embedder, llm=llm)


@pytest.fixture(scope="module")
def corpus(llm_settings: Settings, module_weaviate_store_factory) -> Indexed:
    data = load_dataset(DATA / "scifact", max_queries=4, corpus_limit=40, seed=5)
    vectors = module_weaviate_store_factory(f"TestLLM{uuid.uuid4().hex[:8]}")
    settings = dataclasses.replace(llm_settings, collection_prefix=vectors.prefix, llm_max_tokens=48,
                                   llm_context_tokens=400)
    indexed = Indexed(settings, vectors, make_embedder(settings), data.documents, [q.text for q in data.queries])
    indexed.reindex(data.documents)
    return indexed


def test_the_local_server_is_what_the_stack_provisioned(llm_settings: Settings) -> None:
    assert llm_settings.llm_base_url.startswith("http://127.0.0.1:")
    with LLMClient.from_settings(llm_settings) as client:
        reply = client.chat([{"role": "user", "content": "Say hello."}], max_tokens=8, allow_truncated=True)
    assert reply.tokens_in > 0 and reply.tokens_out > 0 and reply.finish_reason in ("stop", "length")


@pytest.mark.parametrize("name", TRANSFORMS)
def test_each_transform_end_to_end(corpus: Indexed, tmp_path: Path, name: str) -> None:
    assert set(TRANSFORMS) == set(available_transforms())
    with corpus.rag(tmp_path) as rag:
        result = rag.query(corpus.questions[0], k=5, transforms=[name], abstain=False)  # a poor rewrite still lists
        usage = rag.llm.usage
    report = result.metadata.details["transforms"][name]
    assert report["error"] is None, report
    assert report["queries"] and all(isinstance(q, str) and q.strip() for q in report["queries"])
    assert result.items
    if name == "prf":
        assert usage.requests == 0  # pseudo-relevance feedback needs no model
        assert report["queries"][0].startswith(corpus.questions[0])
    else:
        assert report["calls"] >= 1 and report["tokens_out"] > 0
    if name == "reformulate":  # the strategy ran on the rewritten query
        assert result.metadata.details["original_query"] == corpus.questions[0]
        assert result.query == report["queries"][0]
    else:  # each generated query was searched, and its list fused with the question's
        labels = [g["list"] for g in result.metadata.details["generated_queries"]]
        assert labels == [f"{name}:{i}" for i in range(1, len(report["queries"]) + 1)]
        fused_lanes = {lane.split(":")[0] for item in result.items for lane in item.lane_scores}
        assert name in fused_lanes
        assert "transform_fusion" in result.metadata.timings_ms


def test_transforms_fan_out_in_parallel_and_fuse(corpus: Indexed, tmp_path: Path) -> None:
    with corpus.rag(tmp_path) as rag:
        result = rag.query(corpus.questions[1], k=5, transforms=["multi_query", "step_back", "prf"], abstain=False)
    transforms = result.metadata.details["transforms"]
    assert set(transforms) == {"multi_query", "step_back", "prf"}
    produced = [q for t in transforms.values() for q in t["queries"]]
    assert len(result.metadata.details["generated_queries"]) == len(produced)
    llm_ms = [transforms[n]["latency_ms"] for n in ("multi_query", "step_back")]
    # both model transforms started before either finished: the wait is shorter than their sum
    assert result.metadata.timings_ms["transforms_wait"] < sum(llm_ms)


@pytest.mark.parametrize("generation", ["simple", "cot", "reflect"])
def test_ask_with_each_generation_strategy(corpus: Indexed, tmp_path: Path, generation: str) -> None:
    pieces: list[str] = []
    with corpus.rag(tmp_path) as rag:
        answer = rag.ask(corpus.questions[0], k=4, generation=generation, on_token=pieces.append)
    assert not answer.abstained and answer.model_configured
    assert answer.answer.strip()
    given = {c.chunk_id for c in answer.context}
    assert answer.context and all(c.chunk_id in given for c in answer.citations)
    assert [c.number for c in answer.context] == list(range(1, len(answer.context) + 1))
    assert answer.uncited == (not answer.citations)
    assert 0.0 <= answer.confidence <= 1.0
    assert answer.tokens_in > 0 and answer.tokens_out > 0
    assert {"retrieve", "context", "generate", "total"} <= set(answer.latency_ms)
    assert "".join(pieces).strip()
    if generation == "reflect":
        assert answer.details["calls"] >= 2 and answer.details["checks"]
        assert answer.details["revisions"] <= 1
        assert answer.answer == "".join(pieces)  # the final revision, handed over at once
    else:
        assert answer.details["calls"] == 1


def test_abstention_skips_the_model(corpus: Indexed, tmp_path: Path) -> None:
    with corpus.rag(tmp_path) as rag:
        before = rag.llm.usage.requests
        answer = rag.ask("What is the airspeed of an unladen swallow?", abstain_floor=0.99)
        assert rag.llm.usage.requests == before
    assert answer.abstained and answer.answer == "" and "insufficient" in answer.message
    assert answer.tokens_in == answer.tokens_out == 0


def test_answer_cache_hits_and_a_changed_passage_misses(corpus: Indexed, tmp_path: Path) -> None:
    question = corpus.questions[2]
    with corpus.rag(tmp_path) as rag:
        first = rag.ask(question, k=3)
        requests = rag.llm.usage.requests
        second = rag.ask(question, k=3)
        assert rag.llm.usage.requests == requests  # served from the cache
        assert len(rag.answer_cache) == 1
        uncached = rag.ask(question, k=3, use_cache=False)
        assert rag.llm.usage.requests == requests + 1 and not uncached.cached
    assert not first.cached and second.cached
    assert second.answer == first.answer and [c.chunk_id for c in second.citations] == \
        [c.chunk_id for c in first.citations]
    assert second.latency_ms["cache_lookup"] < 50

    # re-ingest with the top passage's document edited: its chunk gets a new id and hash, the key misses
    changed_id = first.context[0].document_id
    documents = [d if d.document_id != changed_id else dataclasses.replace(
        d, text=d.text + " An added closing sentence.",
        content_hash=document_hash(d.text + " An added closing sentence.", d.title, d.metadata, d.scope))
        for d in corpus.documents]
    corpus.reindex(documents)
    try:
        with corpus.rag(tmp_path) as rag:
            third = rag.ask(question, k=3)
            assert not third.cached and len(rag.answer_cache) == 2
    finally:
        corpus.reindex(corpus.documents)


def test_server_down_is_a_clean_error_and_caches_nothing(corpus: Indexed, tmp_path: Path) -> None:
    down = LLMClient(f"http://127.0.0.1:{free_port()}/v1", max_retries=2, backoff_seconds=0.05, timeout=5)
    with corpus.rag(tmp_path, llm=down) as rag:
        started = time.monotonic()
        with pytest.raises(LLMUnavailableError, match="cannot reach"):
            rag.ask(corpus.questions[0], k=3)
        assert time.monotonic() - started < 10
        assert down.usage.requests == 3  # the first try and two retries
        assert len(rag.answer_cache) == 0
        # the transforms degrade instead: the query still answers, the failure is in the metadata
        result = rag.query(corpus.questions[0], k=3, transforms=["multi_query"])
    assert result.items and "LLMUnavailableError" in result.metadata.details["transforms"]["multi_query"]["error"]
    with Ragloom(dataclasses.replace(corpus.settings, data_dir=tmp_path), vectors=corpus.vectors,
                 embedder=corpus.embedder, llm=down, hide_schema=True) as service_mode:  # as the service runs it
        hidden = service_mode.query(corpus.questions[0], k=3, transforms=["multi_query"])
    assert hidden.items and hidden.metadata.details["transforms"]["multi_query"]["error"] == \
        "details in the service log"  # the model server's address stays in the log


def test_timeouts_are_bounded(corpus: Indexed, tmp_path: Path, llm_settings: Settings) -> None:
    slow = LLMClient(llm_settings.llm_base_url, llm_settings.llm_model, llm_settings.llm_api_key, timeout=0.3)
    with corpus.rag(tmp_path, llm=slow, llm_max_tokens=48, llm_transform_timeout_seconds=0.2) as rag:
        started = time.monotonic()
        with pytest.raises(LLMTimeoutError):
            rag.ask(corpus.questions[0], k=5, use_cache=False)
        assert time.monotonic() - started < 5
        started = time.monotonic()
        result = rag.query(corpus.questions[0], k=3, transforms=["hyde", "decompose"])
        elapsed = time.monotonic() - started
    assert result.items and elapsed < 3
    for name in ("hyde", "decompose"):
        error = result.metadata.details["transforms"][name]["error"]
        assert "timed out" in error or "LLMTimeoutError" in error


def test_without_a_model_ask_returns_the_ranked_context(corpus: Indexed, tmp_path: Path) -> None:
    with corpus.rag(tmp_path, llm=None) as rag:
        answer = rag.ask(corpus.questions[0], k=3, transforms=["hyde", "prf"])
    assert not answer.model_configured and answer.answer == "" and "no language model" in answer.message
    assert answer.context and answer.retrieval["transforms"]["prf"]["queries"]
    assert "no language model" in answer.retrieval["transforms"]["hyde"]["error"]


def test_query_job_answers_with_the_local_model(corpus: Indexed, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import pandas as pd

    from pipelines.query import query_job
    from resources import ArtifactStore, EmbedderResource, Neo4jResource, NlpResource, WeaviateResource

    s = corpus.settings
    monkeypatch.setenv("RAGLOOM_LLM_MAX_TOKENS", "64")  # the job's resources read the model settings from here
    resources = {"artifacts": ArtifactStore(base_dir=str(tmp_path)),
                 "weaviate": WeaviateResource(collection_prefix=s.collection_prefix, api_key=s.weaviate_api_key),
                 "neo4j": Neo4jResource(namespace=s.collection_prefix.lower(), password=s.neo4j_password),
                 "embedder": EmbedderResource(), "nlp": NlpResource()}
    config = {"query": corpus.questions[3], "strategy": "hybrid", "k": 3, "answer": True, "transforms": "prf",
              "use_cache": False}
    result = query_job.execute_in_process(run_config={"ops": {"run_queries": {"config": config}}},
                                          resources=resources)
    assert result.success
    frame = pd.read_parquet(result.output_for_node("run_queries"))
    assert len(frame) == 1 and frame["answer"][0].strip() and frame["tokens_out"][0] > 0


@pytest.mark.parametrize("strategy", ["multi_query", "hyde"])
def test_multi_query_and_hyde_run_as_strategies_composing_with_reformulate(corpus: Indexed, tmp_path: Path,
                                                                           strategy: str) -> None:
    with corpus.rag(tmp_path) as rag:
        result = rag.query(corpus.questions[0], k=5, strategy=strategy, transforms=["reformulate"], abstain=False,
                           options={"base": "dense"})
    meta = result.metadata.to_dict()
    assert meta["strategy"] == strategy and meta["base_strategy"] == "dense" and not meta["fallbacks"]
    assert set(meta["transforms"]) == {"reformulate", strategy}  # the entry-time transform ran too
    generated = [g for g in meta["generated_queries"] if g["list"].startswith(f"{strategy}:")]
    assert generated and all(g["query"].strip() for g in generated)
    assert result.items


@pytest.mark.parametrize("strategy", ["multi_query", "hyde"])
def test_without_a_reachable_model_the_strategies_are_their_base_and_say_why(corpus: Indexed, tmp_path: Path,
                                                                             strategy: str) -> None:
    down = LLMClient(f"http://127.0.0.1:{free_port()}/v1", max_retries=0, backoff_seconds=0.05, timeout=5)
    with corpus.rag(tmp_path, llm=down) as rag:
        result = rag.query(corpus.questions[0], k=3, strategy=strategy, transforms=[], abstain=False)
    assert result.metadata.strategy == strategy and result.items
    assert any(f.startswith(f"{strategy}->hybrid: LLMUnavailableError") for f in result.metadata.fallbacks), \
        result.metadata.fallbacks
    with corpus.rag(tmp_path, llm=None) as rag:
        result = rag.query(corpus.questions[0], k=3, strategy=strategy, transforms=[], abstain=False)
    assert any("no language model configured" in f for f in result.metadata.fallbacks)
