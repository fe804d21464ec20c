"""The retriever template (``search`` -> abstract ``get_search_results``), its context, and the registry."""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

import numpy as np

from ragloom.dynamic import EXPIRES_AT, NAMESPACE, has_property, visibility_nodes
from ragloom.errors import FilterError, QueryError, RagloomError, RetrievalError, StoreError
from ragloom.filters import Condition, Node, Not, bind, build_where, meta_property_name, parse_iso_date
from ragloom.options import Option, check_options, parse_option_pairs
from ragloom.registry import Registry
from ragloom.retrieval import fusion
from ragloom.retrieval import postprocess as pp
from ragloom.retrieval.cache import ResultCache, result_key
from ragloom.retrieval.graph_index import snapshot_cache
from ragloom.retrieval.query import (
    DEFAULT_K,
    MAX_K,
    MAX_QUERY_CHARS,
    Query,
    as_mapping,
    check_filters,
    check_k,
    check_scope,
    check_text,
)
from ragloom.retrieval.rerank import rerank
from ragloom.settings import QUERY_VECTOR_CACHE
from ragloom.stores.base import GraphStore, VectorStore
from ragloom.types import ResultInfo, RetrievalResult, RetrievedItem, Scope

log = logging.getLogger(__name__)

__all__ = ["MAX_K", "MAX_QUERY_CHARS"]  # re-exported: the service's request models bound k and the text with them

# Options every strategy accepts: post-processing, applied by Retriever.search after the strategy ran.
POSTPROCESS_OPTIONS: dict[str, Option] = {
    "dedup": Option(True, help="drop items whose vector has cosine >= dedup_threshold with a better-ranked item"),
    "dedup_threshold": Option(pp.DEFAULT_DEDUP_THRESHOLD, min=0.0, max=1.0, exclusive_min=True,
                              help="cosine at which two items count as copies (distinct parallel passages "
                              "reach 0.97)"),
    "abstain": Option(True, help="return no items when the best dense cosine is below abstain_floor"),
    "abstain_floor": Option(pp.DEFAULT_ABSTAIN_FLOOR, min=-1.0, max=1.0,
                            help="the sufficiency floor on the best item's cosine to the query"),
    "reorder": Option(False, help="lost-in-the-middle order (best at both ends); ranks still say relevance"),
    "keep_vectors": Option(False, help="leave each item's vector in metadata[\"vector\"]"),
    "max_per_document": Option(0, min=0, max=MAX_K,
                               help="at most this many items per document in the top k; 0 = no cap"),
    "neighbour_weight": Option(0.0, min=0.0, max=2.0, help="re-rank by score + this × the mean score of each "
                               "hit's retrieved neighbours (the chunks before and after it); 0 = off"),
    "neighbour_candidates": Option(0, min=0, max=MAX_K * 2, help="candidates the strategy is asked for when "
                                   "neighbour_weight is on (at least k); 0 = 4 × k"),
    "neighbour_scope": Option("section", choices=pp.NEIGHBOUR_SCOPES, help="neighbours must share the section "
                              "(heading path), or only the document"),
    "parent_document": Option(False, help="return each hit's parent chunk instead of the hit (chunkings with "
                              "parents, e.g. hierarchical); hits sharing a parent give it once"),
    "rerank": Option(True, help="cross-encoder reranking after fusion, when a reranker model is available"),
    "rerank_candidates": Option(30, min=1, max=MAX_K * 2, help="how many of the strategy's best items the "
                                "reranker reads (at least k)"),
    "relevance_floor": Option(0.0, min=0.0, max=1.0, help="drop reranked items whose relevance (sigmoid) is "
                              "below this; 0 = off; when it drops every item, an abstaining query (abstain) says "
                              "it abstained with reason 'no results'"),
}
POSTPROCESS_DEFAULTS: dict[str, Any] = {name: option.default for name, option in POSTPROCESS_OPTIONS.items()}


SCHEMA_RECHECK_SECONDS = 5.0  # a namespace property missing from a collection is looked for again after this


class RetrievalContext:
    """What retrievers run against: the vector store, and the graph store, embedder and spaCy pipeline,
    each given directly or as a loader called once on first use (so a dense query never opens Neo4j)."""

    def __init__(self, vectors: VectorStore, *, embedder: Any = None, graph: GraphStore | None = None,
                 nlp: Any = None, reranker: Any = None, load_embedder: Callable[[], Any] | None = None,
                 load_graph: Callable[[], GraphStore] | None = None,
                 load_nlp: Callable[[], Any] | None = None, load_reranker: Callable[[], Any] | None = None,
                 result_cache: ResultCache | None = None, hide_schema: bool = False,
                 load_llm: Callable[[], Any] | None = None, load_router: Callable[[], Any] | None = None,
                 make_expansion: Callable[[Sequence[str], Mapping[str, Mapping[str, Any]]], Any] | None = None,
                 graph_version_seconds: float = 0.0, query_vector_cache: int = QUERY_VECTOR_CACHE) -> None:
        self.vectors = vectors
        # (transform names, their options) -> an Expand that is also a context manager; given by the composition
        # root (ragloom.api), so strategies that search with generated queries never import the model layer
        self.make_expansion = make_expansion
        # how long graph strategies trust the last graph version read (0: read it on every query)
        self.graph_version_seconds = graph_version_seconds
        # the service's mode: filters on unknown / mistyped fields match nothing (see filters.bind), and results
        # carry no store's or model's own words (error_text)
        self.hide_schema = hide_schema
        self._values = {"embedder": embedder, "graph": graph, "nlp": nlp, "reranker": reranker, "llm": None,
                        "router": None}
        self._loaders = {"embedder": load_embedder, "graph": load_graph, "nlp": load_nlp,
                         "reranker": load_reranker, "llm": load_llm, "router": load_router}
        self._errors: dict[str, str] = {}
        self.cache: dict[str, Any] = {}  # facts learned about collections (e.g. hierarchical leaf level)
        self._query_vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._query_lock = threading.Lock()
        self._schema_read: dict[str, float] = {}  # collection -> when its schema was last re-read for visibility
        self.query_vector_size = query_vector_cache  # 0: none kept
        self.result_cache: ResultCache | None = result_cache

    def _get(self, name: str) -> Any:
        if self._values[name] is None and self._loaders[name] is not None and name not in self._errors:
            try:
                self._values[name] = self._loaders[name]()
            except RagloomError as e:
                self._errors[name] = str(e)
                raise
        return self._values[name]

    @property
    def embedder(self) -> Any:
        embedder = self._get("embedder")
        if embedder is None:
            raise RetrievalError("no embedder configured: dense, hybrid and graph_rag need one")
        return embedder

    @property
    def nlp(self) -> Any:
        return self._get("nlp")

    def error_text(self, error: object, logged: bool = False) -> str:
        """``error``'s own words, for a result's fallbacks. In the service (``hide_schema``), which returns results
        to its callers, they are logged instead (unless ``logged`` already): a store's or a model's text can name
        hosts, collections and namespaces, which the service keeps to its log (ragloom.service.errors)."""
        if not self.hide_schema:
            return str(error)
        if not logged:
            log.warning("a query took a fallback: %s", error)
        kind = f"{type(error).__name__}; " if isinstance(error, BaseException) else ""
        return f"{kind}details in the service log"

    def _optional(self, name: str, unavailable: str, unconfigured: str) -> tuple[Any, str]:
        """(the ``name`` value or None, why not): one that cannot be loaded is a reason, not a crash (tried once)."""
        try:
            value = self._get(name)
        except RagloomError as e:
            return None, f"{unavailable}: {self.error_text(e)}"
        if value is None:  # a load that failed before: its words were logged then, not again on every query
            error = self._errors.get(name)
            return None, f"{unavailable}: {self.error_text(error, logged=True)}" if error else unconfigured
        return value, ""

    def graph(self) -> tuple[GraphStore | None, str]:
        """(the graph store or None, why not). A store that cannot be reached is a reason, not a crash."""
        return self._optional("graph", "graph store unavailable", "no graph store configured")

    def reranker(self) -> tuple[Any, str]:
        """(the reranker or None, why not). A model that cannot be loaded is a reason, not a crash: it is
        tried once per context."""
        return self._optional("reranker", "no reranker", "no reranker configured (RAGLOOM_RERANK_MODEL)")

    def llm(self) -> tuple[Any, str]:
        """(the LLM client or None, why not): strategies that can use a model (multi_hop's follow-up queries)
        run without one."""
        return self._optional("llm", "no language model", "no language model configured (RAGLOOM_LLM_*)")

    def learned_router(self) -> tuple[Any, str]:
        """(the trained router or None, why not): loaded once from the configured file (RAGLOOM_ROUTER_MODEL),
        the only place a router comes from."""
        return self._optional("router", "no usable trained router", "no trained router configured")

    def property_types(self, collection: str, refresh: bool = False) -> dict[str, str] | None:
        """Property -> data type of a chunking's collection; None when there is no store or it cannot
        be read (the query itself then reports why, e.g. a collection not indexed yet)."""
        if self.vectors is None:
            return None
        try:
            return self.vectors.property_types(collection, refresh=refresh)
        except RagloomError:
            return None

    def visibility(self, collection: str, exclude_dynamic: bool, namespaces: Sequence[str] | None,
                   exclude_tools: Sequence[str] = ()) -> tuple[Node, ...]:
        """The filter nodes a query adds for injected items and namespaces (``ragloom.dynamic``), against the
        collection's properties (re-read once when namespaces are asked for and none is known: ingestion may
        have added the first since)."""
        types = self.property_types(collection)
        if namespaces is not None and types is not None and not has_property(types, NAMESPACE) \
                and self._recheck_due(collection):
            types = self.property_types(collection, refresh=True)
        return visibility_nodes(types, exclude_dynamic=exclude_dynamic, namespaces=namespaces,
                                exclude_tools=exclude_tools)

    def _recheck_due(self, collection: str) -> bool:
        """Whether a collection's schema may be read again for a property not seen yet: at most once per
        SCHEMA_RECHECK_SECONDS, so queries asking for namespaces before any chunk has one cost no schema read
        each."""
        now = time.monotonic()
        with self._query_lock:
            if now - self._schema_read.get(collection, -SCHEMA_RECHECK_SECONDS) < SCHEMA_RECHECK_SECONDS:
                return False
            self._schema_read[collection] = now
            return True

    def bind_filters(self, collection: str, node: Node | None) -> Node | None:
        """The user's filter checked against the collection's types (re-read once if a field is missing:
        ingestion may have added it since)."""
        if node is None:
            return None
        try:
            return bind(node, self.property_types(collection))
        except FilterError:
            return bind(node, self.property_types(collection, refresh=True), hide_schema=self.hide_schema)

    def query_vector(self, text: str) -> np.ndarray:
        """The embedding of a query, from an LRU of the last ``query_vector_size`` queries (keyed by the
        embedder's model id, so a changed model never serves old vectors)."""
        embedder = self.embedder
        key = (str(getattr(embedder, "model_id", id(embedder))), text)
        with self._query_lock:
            hit = self._query_vectors.get(key)
            if hit is not None:
                self._query_vectors.move_to_end(key)
                return hit
        vector = np.asarray(embedder.encode([text])[0], dtype=np.float32)
        vector.flags.writeable = False  # shared between searches
        with self._query_lock:
            self._query_vectors[key] = vector
            while len(self._query_vectors) > self.query_vector_size:
                self._query_vectors.popitem(last=False)
        return vector


@dataclass
class SearchRequest:
    """One search in flight: its inputs, and what strategies record (lanes run, fallbacks, stage timings)."""

    query: str
    k: int
    scope: Scope
    filters: Node | None
    chunking: str
    context: RetrievalContext
    fetch_k: int  # candidates a strategy should return: k plus room for de-duplication
    include_vectors: bool
    visibility: tuple[Node, ...] = ()  # which injected items and namespaces the query may see (ragloom.dynamic)
    # Whether the first of the strategy's items (whole, best first) already hold everything post-processing will
    # keep: set by the template (None: post-processing reads every candidate). A strategy that reads its items
    # late (graph_rag) may stop reading there.
    enough: Callable[[list[RetrievedItem]], bool] | None = None
    lanes_run: list[str] = field(default_factory=list)
    fallbacks: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)  # strategy-specific metadata for the result
    _vector: np.ndarray | None = None

    def where(self, *extra: Node | None) -> Node:
        """The filter tree for the store: scope AND the user's filters AND visibility AND ``extra``. Every store
        call goes through it; the store translates the tree to its own query language."""
        return build_where(self.scope, self.filters, *self.visibility, *extra)

    def scope_only(self) -> bool:
        """Whether ``where()`` is the scope alone (no user filter, no visibility node): then a chunk the scope
        lets the query read is one the store returns."""
        return self.filters is None and not self.visibility

    def vector(self) -> np.ndarray:
        """The query's embedding, computed once per search."""
        if self._vector is None:
            with self.stage("embed"):
                self._vector = self.context.query_vector(self.query)
        return self._vector

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings_ms[name] = self.timings_ms.get(name, 0.0) + (time.perf_counter() - start) * 1000

    def lane(self, name: str) -> None:
        if name not in self.lanes_run:
            self.lanes_run.append(name)


# (retriever, the search in flight, its strategy options, first-pass items) -> {list name: more ranked items}
Expand = Callable[["Retriever", SearchRequest, dict[str, Any], list[RetrievedItem]], dict[str, list[RetrievedItem]]]


class Retriever(ABC):
    """Subclasses implement ``get_search_results``; ``search`` validates input, builds the scope filter,
    times stages, post-processes, ranks and fills the result's metadata.

    Strategy options are the class's ``declared_options`` (each an ``Option`` with its default, allowed
    values and help), overridable at construction and per search and checked once here; post-processing
    options (``POSTPROCESS_OPTIONS``) are accepted by every strategy.
    """

    name: ClassVar[str] = ""
    default_chunking: ClassVar[str] = "recursive"
    summary: ClassVar[str] = ""  # one line for `ragloom strategies`
    needs_embedder: ClassVar[bool] = True  # embeds the query (every strategy but bm25)
    needs_graph: ClassVar[bool] = False  # reads the Neo4j graph (and spaCy for the query's entities)
    needs_summaries: ClassVar[bool] = False  # reads the chunking's summary level (ragloom eval builds it)
    declared_options: ClassVar[dict[str, Option]] = {}
    # query transforms this strategy is made of (multi_query, hyde): they run even when the query asks for none
    implied_transforms: ClassVar[tuple[str, ...]] = ()

    def __init__(self, context: RetrievalContext, chunking: str | None = None, **options: Any) -> None:
        self.context = context
        self.chunking = chunking or self.default_chunking
        self.options = self._options({}, options)

    # what a subclass provides -----------------------------------------------------------------------
    @abstractmethod
    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        """Up to ``request.fetch_k`` items, best first, each with ``score`` and ``lane_scores``.

        Every store call must use ``request.where(...)`` so the scope filter always applies.
        """

    # the template -------------------------------------------------------------------------------------
    def search(self, query: Query | str, k: int = DEFAULT_K, filters: Mapping[str, Any] | str | Node | None = None,
               scope: Scope | str | None = None, expansion: Expand | None = None, **options: Any
               ) -> RetrievalResult:
        """Run a ``Query`` (made by ``ragloom.query.parse_query``: nothing is checked again), or the query
        ``text`` with its ``k``, ``filters``, ``scope`` and options, checked here against this strategy's
        declarations. ``expansion`` (query transforms, ragloom.llm.expand) is called with the first pass's items
        and returns more ranked lists (one per generated query); all are fused by RRF before post-processing."""
        if isinstance(query, Query):
            if filters is not None or scope is not None or options or k != DEFAULT_K:
                raise QueryError("search: give a Query, or the text with k, filters, scope and options; not both")
        else:
            node, spec = check_filters(filters)
            query = Query(text=check_text(query), strategy=self.name, k=check_k(k), chunking=self.chunking,
                          scope=check_scope(scope), filters=node, filter_spec=spec, options=self.check_options(options))
        if expansion is None and self.implied_transforms and self.context.make_expansion is not None:
            with self.context.make_expansion(self.implied_transforms, query.transform_options) as own:
                return self._execute(query, own)
        return self._execute(query, expansion)

    def _execute(self, q: Query, expansion: Expand | None) -> RetrievalResult:
        """The template: options split, cache looked up, the strategy's search, transforms fused, rerank,
        post-processing, the result's ``ResultInfo``, cache filled."""
        started = time.perf_counter()
        opts = {**self.options, **q.options}
        post = {name: opts.pop(name) for name in POSTPROCESS_DEFAULTS}
        reranker, no_rerank = self.context.reranker() if post["rerank"] else (None, "rerank=False")
        cache_key = None if expansion is not None else self._cache_key(
            query=q.text, k=q.k, scope=q.scope.path, filters=q.filter_spec, options={**opts, **post},
            exclude_dynamic=q.exclude_dynamic, namespaces=q.namespaces, exclude_tools=q.exclude_tools,
            exclude_documents=q.exclude_documents, reranker=getattr(reranker, "model_id", None))
        if cache_key is not None and self.context.result_cache is not None:
            cached = self.context.result_cache.get(cache_key)
            if cached is not None:
                cached.metadata.cache = "hit"
                return _unexpired(cached)
        request = self._request(q, post, reranker is not None, expansion is not None)
        items = self.get_search_results(request, **opts)
        if expansion is not None:
            more = expansion(self, request, opts, items)
            if more:
                with request.stage("transform_fusion"):
                    items = fusion.rrf({"query": items, **more}, k=request.fetch_k)
        self.expanded(request, expansion is not None)
        if reranker is not None:
            items, request.info["rerank"] = self._rerank(request, reranker, items, post)
        else:
            request.info["rerank"] = {"applied": False, "reason": no_rerank}
        with request.stage("postprocess"):
            items, extra = self._postprocess(request, items, post)
        request.timings_ms["total"] = (time.perf_counter() - started) * 1000
        result = RetrievalResult(query=q.text, items=items, metadata=self._info(q, request, {**opts, **post}, extra))
        if cache_key is not None and self.context.result_cache is not None:
            result.metadata.cache = "miss"
            self.context.result_cache.put(cache_key, result)
        return result

    def _request(self, q: Query, post: dict[str, Any], reranks: bool, expands: bool) -> SearchRequest:
        """The search in flight: the user's filter bound to the collection, the visibility nodes, how many
        candidates the post-processing steps need (``fetch_k``), and which of them they read (``enough``;
        ``expands``: query transforms fuse their lists with every candidate)."""
        visibility = self.context.visibility(self.chunking, q.exclude_dynamic, q.namespaces, q.exclude_tools)
        if q.exclude_documents:  # the caller has these already (an agent's earlier reads)
            visibility += (Not(Condition("document_id", "document_id", "in", list(q.exclude_documents))),)
        fetch_k = q.k * 2 if post["dedup"] else q.k
        if post["max_per_document"]:  # room to fill k from other documents
            fetch_k = max(fetch_k, q.k * 4)
        if post["neighbour_weight"]:  # room for neighbours ranked below the cut
            fetch_k = max(fetch_k, q.k, post["neighbour_candidates"] or q.k * 4)
        if reranks:
            fetch_k = max(fetch_k, post["rerank_candidates"])
        # post-processing keeps the first k that survive de-duplication, unless a step reads every candidate
        every = reranks or expands or post["neighbour_weight"] or post["max_per_document"]
        threshold = post["dedup_threshold"] if post["dedup"] else None
        return SearchRequest(
            query=q.text, k=q.k, scope=q.scope, filters=self.context.bind_filters(self.chunking, q.filters),
            chunking=self.chunking, context=self.context, fetch_k=min(MAX_K * 2, fetch_k),
            include_vectors=post["dedup"] or post["abstain"] or post["keep_vectors"], visibility=visibility,
            enough=None if every else functools.partial(pp.keeps, k=q.k, threshold=threshold))

    def _info(self, q: Query, request: SearchRequest, options: dict[str, Any], extra: dict[str, Any]) -> ResultInfo:
        """What the search did, typed; the strategy's and the steps' own records go to ``details``."""
        abstained, why = extra.pop("abstained"), extra.pop("abstain_reason")
        return ResultInfo(
            strategy=self.name, requested_strategy=q.requested_strategy or self.name, chunking=self.chunking,
            k=q.k, scope=request.scope.path, filters=q.filter_spec, exclude_dynamic=q.exclude_dynamic,
            exclude_tools=list(q.exclude_tools), exclude_documents=list(q.exclude_documents), profile=q.profile,
            namespaces=None if q.namespaces is None else list(q.namespaces), lanes_run=request.lanes_run,
            fallbacks=request.fallbacks, timings_ms={name: round(ms, 2) for name, ms in request.timings_ms.items()},
            options=options, abstained=abstained, abstain_reason=why or "",
            best_dense_cosine=extra.pop("best_dense_cosine", None), details={**request.info, **extra})

    def expanded(self, request: SearchRequest, ran: bool) -> None:
        """Called after the query's transforms ran (``ran``: whether any did); a strategy made of transforms
        records here that it degraded to its base retrieval."""
        return None

    def _cache_key(self, **parts: Any) -> str | None:
        """The result cache key, with the collection's version stamp; None when there is no cache (or the
        store keeps no version, so a change could not be noticed)."""
        cache = self.context.result_cache
        version = getattr(self.context.vectors, "collection_version", None)
        if cache is None or version is None:
            return None
        try:
            stamp = version(self.chunking)
        except RagloomError:
            return None
        if not stamp:  # no collection, or nothing written to it yet: no change could be noticed
            return None
        graph_stamp = None
        if self.needs_graph:  # a graph-only change (a re-extraction) must not serve an old walk
            graph, _why = self.context.graph()
            try:
                # the snapshot's own throttled version: a cached result and the walk agree on the graph
                graph_stamp = snapshot_cache(self.context, graph).version(self.chunking) if graph is not None \
                    else None
            except RagloomError:
                return None
            if graph_stamp is None:
                return None
        return result_key(strategy=self.name, chunking=self.chunking, version=stamp, graph_version=graph_stamp,
                          **parts)

    def _rerank(self, request: SearchRequest, reranker: Any, items: list[RetrievedItem],
                post: dict[str, Any]) -> tuple[list[RetrievedItem], dict[str, Any]]:

        pinned = [i for i in items if pp.is_graph_context(i)]  # context, not a passage to judge
        ranked = [i for i in items if not pp.is_graph_context(i)]
        with request.stage("rerank"):
            ranked, info = rerank(reranker, request.query, ranked, max(post["rerank_candidates"], request.k),
                                  post["relevance_floor"])
        return [*pinned, *ranked], info

    def _postprocess(self, request: SearchRequest, items: list[RetrievedItem],
                     post: dict[str, Any]) -> tuple[list[RetrievedItem], dict[str, Any]]:
        extra: dict[str, Any] = {"abstained": False, "abstain_reason": None}
        pinned = [i for i in items if pp.is_graph_context(i)]  # the graph context item stays first
        ranked = [i for i in items if not pp.is_graph_context(i)]
        if post["dedup"]:
            ranked, removed = pp.remove_near_duplicates(ranked, post["dedup_threshold"])
            extra["duplicates_removed"] = removed
        if post["neighbour_weight"]:
            ranked = pp.neighbour_boost(ranked, post["neighbour_weight"], post["neighbour_scope"])
        if post["max_per_document"]:
            ranked, capped = pp.cap_per_document(ranked, post["max_per_document"])
            extra["over_document_cap"] = capped
        ranked = ranked[: request.k]
        if post["abstain"]:
            # the query vector is only needed for items the dense lane did not score
            vector = request.vector() if any("dense" not in i.lane_scores for i in ranked) else None
            best, reason = pp.sufficiency(ranked, vector, post["abstain_floor"])
            extra["best_dense_cosine"] = None if best is None else round(best, 4)
            if reason:
                extra.update(abstained=True, abstain_reason=reason)
                return [], extra
        if post["parent_document"]:
            ranked = self._parents(request, ranked)
        for rank, item in enumerate(ranked, start=1):
            item.rank = rank
        for item in pinned:
            item.rank = 0
        if post["reorder"]:
            ranked = pp.lost_in_the_middle(ranked)
            extra["reordered"] = True
        if not post["keep_vectors"]:
            for item in [*pinned, *ranked]:
                item.metadata.pop("vector", None)
        return [*pinned, *ranked], extra

    def _parents(self, request: SearchRequest, items: list[RetrievedItem]) -> list[RetrievedItem]:
        """Items replaced by their parent chunks, read under the scope filter (a parent the caller may not
        see leaves its child in place)."""
        wanted = list(dict.fromkeys(i.metadata["parent_id"] for i in items if i.metadata.get("parent_id")))
        if not wanted:
            return items
        where = request.where()
        got = store_call(request, "parent_fetch", lambda: self.context.vectors.fetch(
            self.chunking, wanted, where=where, include_vectors=request.include_vectors))
        return pp.replace_by_parents(items, {parent.chunk_id: parent for parent in got})

    @classmethod
    def all_options(cls) -> dict[str, Option]:
        """Every option this strategy accepts: its own, then post-processing."""
        return {**cls.declared_options, **POSTPROCESS_OPTIONS}

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` checked against the declarations (a RetrievalError names the option and what it takes)."""
        return check_options(cls.name, cls.all_options(), options)

    def _options(self, base: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
        defaults = {name: option.default for name, option in self.all_options().items()}
        return {**defaults, **base, **self.check_options(given)}


def _unexpired(result: RetrievalResult) -> RetrievalResult:
    """A cached result without the injected items that expired since it was cached (the visibility filter saw
    them alive then; a query never returns an expired item)."""
    now = datetime.now(UTC)
    key = meta_property_name(EXPIRES_AT)

    def expired(value: Any) -> bool:
        when = parse_iso_date(value) if isinstance(value, str) else value
        return isinstance(when, datetime) and (when if when.tzinfo else when.replace(tzinfo=UTC)) < now

    if not any(expired(i.metadata.get(key)) for i in result.items):
        return result
    return dataclasses.replace(result, items=[i for i in result.items if not expired(i.metadata.get(key))])


def store_call(request: SearchRequest, stage: str, fn: Callable[[], list[RetrievedItem]]) -> list[RetrievedItem]:
    """Run one store query under a timed stage; a store failure stays a StoreError (the server's fault, not the
    request's: the service answers 503), now naming the stage."""
    with request.stage(stage):
        try:
            return fn()
        except StoreError as e:
            raise StoreError(f"{stage}: {e}") from e


# registry --------------------------------------------------------------------------------------------------

_REGISTRY: Registry[type[Retriever]] = Registry("retrieval strategy", Retriever, RetrievalError)
FALLBACK_STRATEGY = "dense"


def register_retrieval_strategy(name: str, cls: type[Retriever] | None = None) -> Any:
    """Make ``cls`` available as ``name`` (also usable as a class decorator); a name can be taken once."""
    register = _REGISTRY.register(name)
    return register(cls) if cls is not None else register


def available_strategies() -> list[str]:
    return _REGISTRY.names()


def strategy_class(name: str) -> type[Retriever]:
    """The registered class for ``name``; an unknown name is an error listing the registered ones."""
    cls = _REGISTRY.get(name)
    if cls is None:
        raise QueryError(f"unknown retrieval strategy {name!r:.80}; choose from {', '.join(available_strategies())}")
    return cls


def options_for(strategies: Sequence[str], given: Mapping[str, Any] | str | None = None,
                pairs: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """Per strategy, the options it declares out of ``given`` (a mapping, or a JSON object as text) and
    ``key=value`` text pairs (which win), each checked against that strategy's declaration. How the CLI, the
    query job and the evaluation take options; a name none of ``strategies`` declares is an error."""
    given = as_mapping("options", given)
    classes = {name: strategy_class(name) for name in strategies}
    for pair in pairs:
        if "=" not in pair or not pair.partition("=")[0].strip():
            raise QueryError(f"option {pair!r:.80} should look like key=value")
    named = {*given, *(pair.partition("=")[0].strip() for pair in pairs)}
    declared = {option for cls in classes.values() for option in cls.all_options()}
    unknown = sorted(named - declared)
    if unknown:
        owner = ", ".join(classes)
        raise QueryError(f"{owner}: unknown option {unknown[0]!r:.80}; options: {', '.join(sorted(declared))}")
    out = {}
    for name, cls in classes.items():
        mine = cls.all_options()
        checked = cls.check_options({k: v for k, v in given.items() if k in mine})
        own_pairs = [pair for pair in pairs if pair.partition("=")[0].strip() in mine]
        out[name] = {**checked, **parse_option_pairs(name, mine, own_pairs)}
    return out


def describe_strategies(strategies: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Each registered strategy (or those named) with its summary, default chunking and declared options;
    the post-processing options every strategy takes are under ``postprocess``."""
    classes = [strategy_class(name) for name in (strategies if strategies is not None else available_strategies())]
    return [{"name": cls.name, "summary": cls.summary, "default_chunking": cls.default_chunking,
             "options": _describe_options(cls.declared_options), "postprocess": _describe_options(POSTPROCESS_OPTIONS)}
            for cls in classes]


def _describe_options(declared: Mapping[str, Option]) -> list[dict[str, str]]:
    return [{"name": name, "default": option.default_text(), "allowed": option.allowed(), "help": option.help}
            for name, option in declared.items()]


def options_markdown(strategies: Sequence[str] | None = None) -> str:
    """The README's table of every retrieval option (``ragloom strategies --markdown`` prints it)."""
    rows = ["| strategy | option | default | takes | what it does |", "| --- | --- | --- | --- | --- |"]
    sections = [("every strategy", _describe_options(POSTPROCESS_OPTIONS))]
    sections += [(s["name"], s["options"]) for s in describe_strategies(strategies)]
    for owner, options in sections:
        for o in options:
            cells = [owner, f"`{o['name']}`", f"`{o['default']}`", o["allowed"], o["help"]]
            rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)




def get_retriever(name: str, context: RetrievalContext, chunking: str | None = None, **options: Any) -> Retriever:
    """The registered strategy ``name`` on ``chunking``; an unknown name is a QueryError listing the known ones
    (the explicit fallback to dense is the query's ``unknown_strategy="fallback"``, ``ragloom.query``)."""
    return strategy_class(name)(context, chunking=chunking, **options)
