"""How one chunking's chunks are indexed, stage by stage, with the settings resolved here once.

The Dagster assets run one stage each (``vectors_<c>``, ``graph_<c>``, ``summaries_<c>``: separate steps, retried
and observed one by one); the evaluation runner runs them all in order through ``index_chunking``. Both call the
functions below, so the figures an evaluation reports come from the code Dagster runs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragloom.indexing.graph import GraphSyncReport, sync_graph
from ragloom.indexing.summaries import SummaryReport, state_file, summary_model, sync_summaries
from ragloom.indexing.synonyms import SynonymParams
from ragloom.indexing.vectors import VectorSyncReport, sync_vectors
from ragloom.settings import Settings
from ragloom.stores.embedding_cache import EmbeddingCache
from ragloom.types import Chunk, Log


def embedding_cache(settings: Settings) -> EmbeddingCache:
    """The embedding cache every stage shares (Parquet segments keyed by model id and text hash)."""
    return EmbeddingCache(cache_folder(settings.artifacts_dir))


def cache_folder(artifacts_dir: Path) -> Path:
    return artifacts_dir / "embedding_cache"


def index_vectors(settings: Settings, store: Any, embedder: Any, chunking: str, chunks: Sequence[Chunk], *,
                  log: Log) -> VectorSyncReport:
    """Weaviate holds exactly the current chunks of ``chunking`` (new ones embedded through the cache)."""
    return sync_vectors(store, embedder, chunking, list(chunks), cache=embedding_cache(settings), log=log)


def index_graph(settings: Settings, store: Any, extractor: Any, embedder: Any, chunking: str,
                chunks: Sequence[Chunk], *, log: Log) -> GraphSyncReport:
    """Neo4j holds the entities and relations of exactly the current chunks (synonym edges per the settings;
    entity names embedded through the shared embedding cache, by ``embedder``: the short-text one,
    ``make_embedder(settings, short_texts=True)``)."""
    return sync_graph(store, extractor, chunking, list(chunks), log=log, embedder=embedder,
                      synonyms=SynonymParams.from_settings(settings), cache=embedding_cache(settings))


def index_summaries(settings: Settings, store: Any, embedder: Any, chunking: str, chunks: Sequence[Chunk], *,
                    log: Log, use_llm: bool | None = None) -> SummaryReport:
    """The chunking's RAPTOR-lite summary level, incrementally: by the configured model when ``use_llm`` (default:
    ``Settings.summaries_use_llm``; the Dagster asset passes the choice it was defined with, which also chose
    its pool), else extractive."""
    use_llm = settings.summaries_use_llm() if use_llm is None else use_llm
    with summary_model(settings, use_llm) as llm:
        state = state_file(settings.artifacts_dir, store, chunking)
        return sync_summaries(store, embedder, chunking, list(chunks), state, cache=embedding_cache(settings),
                              llm=llm, budget_tokens=settings.summary_tokens, window=settings.summary_window, log=log)


@dataclass
class Indexed:
    """What ``index_chunking`` did, stage by stage, with each stage's seconds."""

    chunking: str
    vectors: VectorSyncReport
    graph: GraphSyncReport | None = None
    summaries: SummaryReport | None = None
    seconds: dict[str, float] = field(default_factory=dict)


def index_chunking(settings: Settings, chunking: str, chunks: Sequence[Chunk], *, vectors: Any, embedder: Any,
                   graph: Any = None, extractor: Any = None, name_embedder: Any = None, summaries: bool = False,
                   log: Log = print) -> Indexed:
    """Every stage for one chunking, in the assets' order: vectors, then summaries (they read the vectors'
    collection), then the graph when a graph store and an extractor are given, its entity names embedded by
    ``name_embedder`` (default: ``embedder``)."""
    seconds: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        started = time.perf_counter()
        out = fn()
        seconds[name] = round(time.perf_counter() - started, 2)
        return out

    out = Indexed(chunking, timed("vectors", lambda: index_vectors(settings, vectors, embedder, chunking, chunks,
                                                                   log=log)))
    if summaries:
        out.summaries = timed("summaries", lambda: index_summaries(settings, vectors, embedder, chunking, chunks,
                                                                   log=log))
    if graph is not None and extractor is not None:
        out.graph = timed("graph", lambda: index_graph(settings, graph, extractor, name_embedder or embedder,
                                                       chunking, chunks, log=log))
    out.seconds = seconds
    return out
