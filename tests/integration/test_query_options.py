"""Options and collections at every entry point, on the real stores: `ragloom query` (its --option reaching
Weaviate, hierarchical searching its own collection), the Launchpad query job (hybrid, graph_rag, an abstained
query's row), and a chunker registered by the user, ingested and queried.

The sample corpus goes into this module's own collections and graph namespace, deleted afterwards.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from pathlib import Path

import pytest

from ragloom.api import Ragloom
from ragloom.chunking import chunker_for
from ragloom.chunking.recursive import RecursiveChunker
from ragloom.cli import main
from ragloom.embedding import make_embedder
from ragloom.extraction import EntityExtractor, load_nlp
from ragloom.indexing.graph import sync_graph
from ragloom.indexing.vectors import sync_vectors
from ragloom.parsing import parse_sources
from ragloom.settings import SAMPLE_CORPUS, Settings
from ragloom.stores.embedding_cache import EmbeddingCache

CUSTOM = "test_options_custom"  # a user's chunker: registered here, unknown to the built-in lists
QUESTION = "Who leads the team that owns the HarborSight platform?"


class WholeSectionChunker(RecursiveChunker):
    """A custom chunker: the recursive splitter with bigger chunks."""

    def __init__(self, **params):
        super().__init__(chunk_size=params.pop("chunk_size", 250), **params)


@dataclasses.dataclass
class Corpus:
    settings: Settings
    rag: Ragloom


@pytest.fixture(scope="module")
def corpus(settings: Settings, tmp_path_factory, register_chunker_for_module, module_weaviate_store_factory,
           module_neo4j_store_factory) -> Corpus:
    register_chunker_for_module(CUSTOM, WholeSectionChunker)
    tag = uuid.uuid4().hex[:8]
    vectors, graph = module_weaviate_store_factory(f"TestOpt{tag}"), module_neo4j_store_factory(f"test_opt_{tag}")
    ns = dataclasses.replace(settings, collection_prefix=vectors.prefix, graph_namespace=graph.namespace,
                             artifacts_path=tmp_path_factory.mktemp("artifacts"))
    documents = parse_sources([SAMPLE_CORPUS], SAMPLE_CORPUS).documents
    embedder, nlp = make_embedder(settings), load_nlp(settings.spacy_model)
    cache = EmbeddingCache(settings.artifacts_dir / "embedding_cache")
    for chunking in ("recursive", "hierarchical", CUSTOM):
        chunks = chunker_for(chunking, embedder).chunk_many(documents)
        sync_vectors(vectors, embedder, chunking, chunks, cache=cache)
        if chunking == "recursive":
            sync_graph(graph, EntityExtractor(nlp), chunking, chunks)
    queries = make_embedder(settings, short_texts=True)  # as every API embeds queries (the CLI's too)
    return Corpus(ns, Ragloom(ns, vectors=vectors, graph=graph, embedder=queries, nlp=nlp))


@pytest.fixture
def cli_env(corpus: Corpus, monkeypatch) -> None:
    monkeypatch.setenv("RAGLOOM_COLLECTION_PREFIX", corpus.settings.collection_prefix)
    monkeypatch.setenv("RAGLOOM_GRAPH_NAMESPACE", corpus.settings.graph_namespace)


def cli_query(capsys, *args: str) -> dict:
    assert main(["query", QUESTION, "--json", "-k", "5", *args]) == 0
    return json.loads(capsys.readouterr().out)


def ids(items: list) -> list[str]:
    return [i["chunk_id"] if isinstance(i, dict) else i.chunk_id for i in items]


# the CLI ---------------------------------------------------------------------------------------------------


def test_cli_hierarchical_searches_the_hierarchical_collection(cli_env, capsys):
    """Issue 14: `ragloom query --strategy hierarchical` used to search the recursive collection, flat."""
    out = cli_query(capsys, "--strategy", "hierarchical", "--option", "abstain=false")
    meta = out["metadata"]
    assert meta["chunking"] == "hierarchical" and meta["fallbacks"] == []
    assert meta["hierarchical"]["levels_searched"]  # coarse-to-fine ran: levels above the leaves were searched
    assert out["items"] and all(i["metadata"].get("level", 0) >= 1 for i in out["items"])
    flat = cli_query(capsys, "--strategy", "hierarchical", "--chunking", "recursive", "--option", "abstain=false")
    assert flat["metadata"]["chunking"] == "recursive"  # an explicit --chunking still wins
    assert any("hierarchical->flat" in f for f in flat["metadata"]["fallbacks"])


def test_cli_alpha_reaches_weaviate(corpus, cli_env, capsys):
    """--option alpha: 0 ranks as BM25 alone, 1 as the vector search alone (fails if the knob were dropped)."""
    plain = {"abstain": False, "dedup": False}
    keyword = corpus.rag.query(QUESTION, strategy="bm25", k=5, **plain)
    vector = corpus.rag.query(QUESTION, strategy="dense", k=5, **plain)
    assert ids(keyword.items) != ids(vector.items)  # otherwise the test could not tell them apart
    at_0 = cli_query(capsys, "--option", "alpha=0", "--options", '{"abstain": false, "dedup": false}')
    at_1 = cli_query(capsys, "--option", "alpha=1", "--options", '{"abstain": false, "dedup": false}')
    assert at_0["metadata"]["options"]["alpha"] == 0.0 and at_1["metadata"]["options"]["alpha"] == 1.0
    assert ids(at_0["items"]) == ids(keyword.items)
    assert ids(at_1["items"]) == ids(vector.items)


def test_cli_dedup_threshold_reaches_the_post_processing(cli_env, capsys):
    loose = cli_query(capsys, "--options", '{"abstain": false, "dedup_threshold": 0.05}')
    off = cli_query(capsys, "--options", '{"abstain": false, "dedup": false}')
    assert loose["metadata"]["duplicates_removed"]  # everything is a near-duplicate at cosine 0.05
    assert len(loose["items"]) < len(off["items"]) == 5


# the Launchpad query job --------------------------------------------------------------------------------


def run_query_job(corpus: Corpus, tmp_path: Path, config: dict) -> list[dict]:
    from pipelines.query import query_job
    from resources import ArtifactStore, EmbedderResource, Neo4jResource, NlpResource, WeaviateResource

    s = corpus.settings
    resources = {"artifacts": ArtifactStore(base_dir=str(tmp_path)),
                 "weaviate": WeaviateResource(collection_prefix=s.collection_prefix, api_key=s.weaviate_api_key),
                 "neo4j": Neo4jResource(namespace=s.graph_namespace, password=s.neo4j_password),
                 "embedder": EmbedderResource(), "nlp": NlpResource()}
    result = query_job.execute_in_process(run_config={"ops": {"run_queries": {"config": config}}},
                                          resources=resources)
    assert result.success
    path = Path(result.output_for_node("run_queries"))
    return json.loads(path.with_suffix(".json").read_text())


def test_query_job_runs_hybrid_with_options(corpus, tmp_path):
    rows = run_query_job(corpus, tmp_path, {"query": QUESTION, "strategy": "hybrid", "k": 4,
                                            "options": {"alpha": 0.0, "dedup": False, "abstain": False}})
    keyword = corpus.rag.query(QUESTION, strategy="bm25", k=4, abstain=False, dedup=False)
    assert [r["chunk_id"] for r in rows] == ids(keyword.items)  # alpha=0 reached the job's search
    assert {(r["strategy"], r["chunking"], r["abstained"]) for r in rows} == {("hybrid", "recursive", False)}
    assert [r["rank"] for r in rows] == [1, 2, 3, 4]


def test_query_job_runs_graph_rag(corpus, tmp_path):
    rows = run_query_job(corpus, tmp_path, {"query": QUESTION, "strategy": "graph_rag", "k": 5,
                                            "options": {"abstain": False, "seed_chunks": 3}})
    assert rows and {r["strategy"] for r in rows} == {"graph_rag"}
    assert rows[0]["fallbacks"] == ""  # the graph answered: seeds found, chunks reached
    assert rows[0]["rank"] == 0 and rows[0]["text"].startswith("Knowledge graph")  # the subgraph context item
    assert any("HarborSight" in r["text"] for r in rows[1:])


def test_query_job_leaves_a_row_for_an_abstained_query(corpus, tmp_path):
    rows = run_query_job(corpus, tmp_path, {"query": QUESTION, "strategy": "dense", "options": {"abstain_floor": 0.99}})
    [row] = rows
    assert row["abstained"] is True and row["chunk_id"] == "" and row["rank"] == 0
    assert row["text"].startswith("(abstained: best dense cosine") and "0.99" in row["text"]


# a chunker the user registered --------------------------------------------------------------------------


def test_a_registered_chunker_is_ingested_and_queried(corpus):
    result = corpus.rag.query(QUESTION, strategy="hybrid", chunking=CUSTOM, k=3, abstain=False)
    assert result.metadata.chunking == CUSTOM and result.items
    assert corpus.rag.context.vectors.collection_name(CUSTOM) != corpus.rag.context.vectors.collection_name("recursive")
