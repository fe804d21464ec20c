"""The Python API: retrieval against the materialized stores, used by the CLI, the Dagster query job and tests.

    with Ragloom.from_settings() as rag:
        result = rag.query("What causes X?", strategy="graph_rag", k=5, filters={"year": {"gte": 2020}},
                           scope="acme/alice")
        text, citations = rag.context_text(result, token_budget=1500)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ragloom.errors import RagloomError, RetrievalError
from ragloom.retrieval import RetrievalContext, Retriever, assemble_context, get_retriever
from ragloom.retrieval.postprocess import Citation
from ragloom.settings import ALL_STRATEGIES, Settings
from ragloom.types import RetrievalResult, Scope

log = logging.getLogger(__name__)


class Ragloom:
    """Weaviate is connected at construction; the embedder, spaCy and Neo4j are loaded on first use, once.

    Pass ``vectors`` / ``graph`` / ``embedder`` / ``nlp`` to reuse objects you already hold (they are not
    closed by ``close()``); anything this object opened itself, it closes.
    """

    def __init__(self, settings: Settings | None = None, *, vectors: Any = None, graph: Any = None,
                 embedder: Any = None, nlp: Any = None) -> None:
        self.settings = settings or Settings.from_env()
        self._owned: list[Any] = []
        if vectors is None:
            from ragloom.stores.weaviate import WeaviateStore

            vectors = WeaviateStore.connect(self.settings)
            self._owned.append(vectors)
        self._given_graph = graph is not None
        self.context = RetrievalContext(
            vectors, embedder=embedder, graph=graph, nlp=nlp,
            load_embedder=self._load_embedder, load_graph=self._load_graph, load_nlp=self._load_nlp,
        )
        self._retrievers: dict[tuple[str, str | None], Retriever] = {}

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> Ragloom:
        """From the given settings, else the environment's (``Settings.from_env()``)."""
        return cls(settings)

    # loaders, called once by the context ------------------------------------------------------------
    def _load_embedder(self) -> Any:
        from ragloom.embedding import make_embedder

        return make_embedder(self.settings)

    def _load_graph(self) -> Any:
        from ragloom.stores.neo4j import Neo4jStore

        store = Neo4jStore.connect(self.settings)
        self._owned.append(store)
        return store

    def _load_nlp(self) -> Any:
        from ragloom.extraction import load_nlp

        return load_nlp(self.settings.spacy_model, gemm=self.settings.spacy_gemm)

    # queries ------------------------------------------------------------------------------------------
    def retriever(self, strategy: str = "hybrid", chunking: str | None = None, **options: Any) -> Retriever:
        """The retriever for ``strategy`` on ``chunking``'s collection (None: the strategy's own default,
        ``hierarchical`` for the hierarchical strategy, ``recursive`` otherwise). Unknown strategy: dense,
        with a warning in every result's metadata."""
        chunking = chunking or None  # "" (a CLI or job default) means the strategy's own collection
        if chunking is not None and chunking not in ALL_STRATEGIES:
            raise RetrievalError(f"chunking={chunking!r}: choose one of {', '.join(ALL_STRATEGIES)}")
        if options:
            return get_retriever(strategy, self.context, chunking=chunking, **options)
        key = (strategy, chunking)
        if key not in self._retrievers:
            self._retrievers[key] = get_retriever(strategy, self.context, chunking=chunking)
        return self._retrievers[key]

    def query(self, text: str, strategy: str = "hybrid", k: int = 5,
              filters: Mapping[str, Any] | str | None = None, scope: Scope | str | None = None,
              chunking: str | None = None, **options: Any) -> RetrievalResult:
        """Retrieve ``k`` chunks for ``text``. ``filters``: a dict or JSON text in the filter language
        (ragloom.retrieval.filters); ``scope``: a Scope or a path ``tenant/user/chat[/agent]`` (default: shared
        only); ``options``: the strategy's and post-processing options (see each strategy's ``defaults``)."""
        return self.retriever(strategy, chunking, **options).search(text, k=k, filters=filters, scope=scope)

    def warm(self, strategy: str = "hybrid") -> None:
        """Load now what ``strategy`` needs (embedder; spaCy and Neo4j for graph_rag), so a first query's
        latency is the query's alone. A graph that cannot load is left for the query to report as a fallback."""
        if strategy != "bm25":
            _ = self.context.embedder
        if strategy == "graph_rag":
            self.context.graph()
            try:
                _ = self.context.nlp
            except RagloomError as e:
                log.warning("spaCy model not loaded: %s", e)

    def context_text(self, result: RetrievalResult, token_budget: int = 1500) -> tuple[str, list[Citation]]:
        """The result as numbered passages within ``token_budget`` tokens of the embedding model's tokenizer."""
        from ragloom.chunking.tokens import get_token_counter

        return assemble_context(result, token_budget, get_token_counter(self.settings.embed_model).count)

    # lifecycle ----------------------------------------------------------------------------------------
    def close(self) -> None:
        while self._owned:
            thing = self._owned.pop()
            try:
                thing.close()
            except (RagloomError, OSError) as e:  # closing must not hide the caller's own error
                log.warning("closing %s failed: %s", type(thing).__name__, e)

    def __enter__(self) -> Ragloom:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
