"""The Python API: retrieval against the materialized stores, used by the CLI, the Dagster query job and tests.

    with Ragloom.from_settings() as rag:
        result = rag.query("What causes X?", strategy="graph_rag", k=5, filters={"year": {"gte": 2020}},
                           scope="acme/alice", alpha=0.3)    # other keywords are the strategy's options
        text, citations = rag.context_text(result, token_budget=1500)
        result = rag.query("What causes X?", transforms=["hyde", "multi_query"])   # needs a model, see README
        answer = rag.ask("What causes X?", generation="reflect")   # answer, citations, confidence, tokens, latency
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ragloom import dynamic
from ragloom.answer import Answer, AnswerOptions
from ragloom.answer import answer as answer_question
from ragloom.chunking.tokens import get_token_counter
from ragloom.dynamic import InjectedItem
from ragloom.embedding.batching import CoalescingEmbedder
from ragloom.errors import QueryError, RagloomError
from ragloom.filters import Condition
from ragloom.llm import AnswerCache, Expansion, LLMClient
from ragloom.promotion import Promotion, promote
from ragloom.query import FIELDS, check_chunking, fallback_warning, load_profiles, parse_query
from ragloom.retrieval import RetrievalContext, Retriever, assemble_context, strategy_class
from ragloom.retrieval.cache import ResultCache
from ragloom.retrieval.graph_rag import graph_snapshot
from ragloom.retrieval.postprocess import Citation
from ragloom.retrieval.query import DEFAULT_STRATEGY, Query, as_mapping
from ragloom.retrieval.rerank import reranker_for
from ragloom.retrieval.routing import LearnedRouter
from ragloom.settings import Settings
from ragloom.types import ResultInfo, RetrievalResult, Scope

log = logging.getLogger(__name__)
_UNSET: Any = object()
T = TypeVar("T")


class Ragloom:
    """Weaviate is connected at construction; the embedder, spaCy and Neo4j are loaded on first use, once.

    Pass ``vectors`` / ``graph`` / ``embedder`` / ``nlp`` / ``reranker`` to reuse objects you already hold
    (they are not closed by ``close()``); anything this object opened itself, it closes. ``coalesce_queries``:
    concurrent queries share model calls (``CoalescingEmbedder``), for servers such as ``ragloom serve``.
    ``hide_schema``: filters on unknown or mistyped metadata match nothing instead of raising (the service's
    mode: see ``ragloom.filters.bind``).
    """

    def __init__(self, settings: Settings | None = None, *, vectors: Any = None, graph: Any = None,
                 embedder: Any = None, nlp: Any = None, reranker: Any = None, llm: LLMClient | None = _UNSET,
                 coalesce_queries: bool = False, hide_schema: bool = False) -> None:
        self.settings = settings or Settings.from_env()
        self.profiles = load_profiles(self.settings.agent_profiles)  # checked before anything connects
        self._owned: list[Any] = []
        self._coalesce = coalesce_queries
        self._pools: dict[str, ThreadPoolExecutor] = {}  # "api", "graph": made on first use (RAGLOOM_SERVICE_*)
        self._llm = llm  # _UNSET: the settings' endpoint, made on first use; None: no model
        self._answer_cache: AnswerCache | None = None
        if vectors is None:
            # deferred: the store's driver loads only when a store is opened
            from ragloom.stores.weaviate import WeaviateStore

            vectors = WeaviateStore.connect(self.settings)
            self._owned.append(vectors)
        self._given_graph = graph is not None
        self.context = RetrievalContext(
            vectors, embedder=embedder, graph=graph, nlp=nlp, reranker=reranker,
            load_embedder=self._load_embedder, load_graph=self._load_graph, load_nlp=self._load_nlp,
            load_reranker=self._load_reranker, result_cache=_result_cache(self.settings),
            hide_schema=hide_schema, load_llm=lambda: self.llm, load_router=self._load_router,
            make_expansion=self._expansion,
            graph_version_seconds=self.settings.graph_version_seconds,
            query_vector_cache=self.settings.query_vector_cache,
        )
        self._retrievers: dict[tuple[str, str | None], Retriever] = {}
        self._probes = _Probes()

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> Ragloom:
        """From the given settings, else the environment's (``Settings.from_env()``)."""
        return cls(settings)

    # loaders, called once by the context ------------------------------------------------------------
    def _load_embedder(self) -> Any:
        from ragloom.embedding import make_embedder  # deferred: torch / onnxruntime load only with a model

        embedder = make_embedder(self.settings, short_texts=True)
        recorded = getattr(self.context.vectors, "recorded_models", None)
        if callable(recorded):  # the query side follows the model the collections were indexed with
            from ragloom.embedding.factory import EmbedderParams, follow_recorded  # deferred: as above

            params = EmbedderParams.from_settings(self.settings)
            follow = follow_recorded(params, embedder.model_id, recorded())
            if follow is not None:
                embedder = make_embedder(follow, short_texts=True)
        # The query side embeds short texts (a query, a few names, a chat's items): one intra-op thread embedded a
        # query in 2.05 ms of wall and CPU time, two threads in 2.86 ms wall and 3.58 ms CPU (the same vectors;
        # docs/experiments/2026-11-27-query-embed-thread.md). Ingestion's embedders keep their threads.
        embedder = embedder.single_threaded()
        if self._coalesce:
            embedder = CoalescingEmbedder(embedder)
            self._owned.append(embedder)
        return embedder

    def _load_reranker(self) -> Any:
        return reranker_for(self.settings)

    def _load_graph(self) -> Any:
        from ragloom.stores.neo4j import Neo4jStore  # deferred: the store's driver loads only when a store is opened

        store = Neo4jStore.connect(self.settings)
        self._owned.append(store)
        return store

    def _load_router(self) -> Any:
        return LearnedRouter.load(self.settings.resolved_router_model)

    def _load_nlp(self) -> Any:
        from ragloom.extraction import load_nlp  # deferred: spaCy loads only when the graph is built or queried

        return load_nlp(self.settings.spacy_model, gemm=self.settings.spacy_gemm)

    def _expansion(self, names: Any, options: Mapping[str, Mapping[str, Any]]) -> Any:
        """The query transforms ``names`` over the configured model (the context's generator for multi_query and
        hyde as strategies)."""

        return Expansion(list(names), self.llm, self.settings.llm_transform_timeout_seconds,
                         {n: dict(o) for n, o in options.items()})

    @property
    def llm(self) -> LLMClient | None:
        """The configured model's client (RAGLOOM_LLM_*), or None when no model is configured."""
        if self._llm is _UNSET:
            self._llm = LLMClient.from_settings(self.settings)
            if self._llm is not None:
                self._owned.append(self._llm)
        return self._llm

    @property
    def answer_cache(self) -> AnswerCache:
        if self._answer_cache is None:
            self._answer_cache = AnswerCache.for_settings(self.settings)
            self._owned.append(self._answer_cache)
        return self._answer_cache

    # queries ------------------------------------------------------------------------------------------
    def retriever(self, strategy: str = DEFAULT_STRATEGY, chunking: str | None = None) -> Retriever:
        """The retriever for ``strategy`` on ``chunking``'s collection (None: the strategy's own default), built
        once and reused: per-query options travel in the ``Query``, not the retriever. An unknown strategy or
        chunking is a QueryError naming the known ones."""
        chunking = check_chunking(chunking)
        key = (strategy, chunking)
        if key not in self._retrievers:
            self._retrievers[key] = strategy_class(strategy)(self.context, chunking=chunking)
        return self._retrievers[key]

    def query(self, query: str | Query, /, **fields: Any) -> RetrievalResult:
        """Retrieve chunks for ``query``: a ``Query`` (``ragloom.query.parse_query``), or its text with the query
        fields as keywords (``strategy``, ``k``, ``filters``, ``scope``, ``chunking``, ``transforms``,
        ``transform_options``, ``exclude_dynamic``, ``namespaces``, ``options``; ``ragloom.query.FIELDS``).
        Any other keyword is a strategy or post-processing option (``ragloom strategies`` lists them), checked
        like ``options``.

        ``filters``: a dict or JSON text in the filter language (ragloom.filters); ``scope``: a Scope or a path
        ``tenant/user/chat[/agent]`` (default: shared only). ``namespaces``: absent, all; an empty list, no
        retrieval (an empty result that says so). Expired injected items are never returned.

        ``transforms`` (default RAGLOOM_LLM_TRANSFORMS) run in parallel and are fused by RRF; the generated
        queries are in ``metadata.details["transforms"]``.
        """
        return self.retrieve(self.parse(query, fields))

    def parse(self, query: str | Query, fields: Mapping[str, Any]) -> Query:
        """The Python API's door to ``parse_query``: keywords that are not query fields are options;
        ``profile`` names one of this object's agent profiles (RAGLOOM_AGENT_PROFILES)."""
        if isinstance(query, Query):
            if fields:
                raise QueryError(f"give a Query, or its text with fields; not both (got {sorted(fields)})")
            return query
        named = {k: v for k, v in fields.items() if k in FIELDS}
        options = {k: v for k, v in fields.items() if k not in FIELDS}
        if options:
            named["options"] = {**as_mapping("options", named.get("options")), **options}
        return parse_query(named, text=query, profiles=self.profiles)

    def retrieve(self, query: Query) -> RetrievalResult:
        """Run a parsed ``Query``: its retriever (reused), its transforms, its visibility."""
        if query.skips_retrieval:
            return RetrievalResult(query=query.text, items=[], metadata=ResultInfo(
                strategy=query.strategy, requested_strategy=query.requested_strategy or query.strategy, k=query.k,
                scope=query.scope.path, namespaces=[], profile=query.profile,
                details={"skipped": True, "skip_reason": "namespaces=[]: the caller asked for no retrieval"}))
        retriever = self.retriever(query.strategy, query.chunking)
        names = self.settings.llm_transforms if query.transforms is None else query.transforms
        names = [*names, *retriever.implied_transforms]  # multi_query and hyde as strategies are their transform
        if not names:
            result = retriever.search(query)
        else:
            with self._expansion(names, query.transform_options) as expansion:
                # the first pass and the model's transforms overlap; reformulate runs first (it changes the query)
                text = expansion.rewrite(query.text) if any(t.phase == "rewrite" for t in expansion.transforms) \
                    else query.text
                result = retriever.search(query.replace(text=text), expansion=expansion)
            result.metadata.details["transform_tokens"] = dict(zip(("in", "out"), expansion.tokens, strict=True))
        warning = fallback_warning(query)
        if warning:
            result.metadata.warnings = [*result.metadata.warnings, warning]
            result.metadata.fallbacks = [*result.metadata.fallbacks,
                                         f"{query.requested_strategy}->{query.strategy}: unknown strategy"]
        return result

    def ask(self, question: str | Query, /, *, on_token: Callable[[str], None] | None = None,
            **fields: Any) -> Answer:
        """Retrieve, then answer with citations: abstains without calling the model when retrieval was
        insufficient; with no model configured, returns the ranked context and says so.

        The fields are ``query``'s, plus ``generation`` (simple | cot | reflect; default RAGLOOM_LLM_GENERATION),
        ``generation_options``, ``token_budget`` (context tokens; default RAGLOOM_LLM_CONTEXT_TOKENS) and
        ``use_cache`` (read and write the answer cache). ``on_token``: called with each piece of the answer as
        it streams. Model failures raise LLMError (nothing is cached then).
        """

        query = self.parse(question, fields)
        s = self.settings
        opts = AnswerOptions(generation=query.generation or s.llm_generation, max_tokens=s.llm_max_tokens,
                             temperature=s.llm_temperature, token_budget=query.token_budget or s.llm_context_tokens,
                             generation_options=dict(query.generation_options), use_cache=query.use_cache)
        started = time.perf_counter()
        result = self.retrieve(query)
        retrieve_ms = (time.perf_counter() - started) * 1000
        timings = {f"retrieval.{name}": ms for name, ms in result.metadata.timings_ms.items()}
        spent = result.metadata.details.get("transform_tokens", {})
        out = answer_question(query.text, result, self.llm, opts, get_token_counter(s.embed_model).count,
                              cache=self.answer_cache if query.use_cache else None, on_token=on_token,
                              timings_ms={"retrieve": round(retrieve_ms, 3), **timings},
                              spent=(spent.get("in", 0), spent.get("out", 0)))
        out.latency_ms["total"] = round((time.perf_counter() - started) * 1000, 3)
        return out

    # an agent's memory ----------------------------------------------------------------------------------
    def remember(self, strategies: Sequence[str], text: str, scope: Scope, *, tool: str = "", profile: str = "",
                 ttl_seconds: float | None = None, **options: Any) -> InjectedItem:
        """``inject`` for an agent: ``text`` (a tool's result, a note) into a chat scope (``tenant/user/chat``:
        every agent of the chat sees it) or an agent scope (``.../chat/agent``: that agent only). With ``profile``,
        only the tools the profile remembers are accepted (a QueryError names them) and the tool's TTL is the
        default. The item records its tool and agent (the profile's name, else the scope's agent)."""
        if not scope.chat:
            raise QueryError("inject into a chat scope (tenant/user/chat) or an agent scope (…/chat/agent)")
        if profile:
            if not tool:
                raise QueryError(f"profile {profile!r:.80}: name the tool whose result this is")
            kept = self.profiles.get(profile).tool(tool)
            ttl_seconds = kept.ttl_seconds if ttl_seconds is None else ttl_seconds
        return self.inject(strategies, text, scope, ttl_seconds=ttl_seconds, tool=tool,
                           agent_id=profile or scope.agent, **options)

    def warm(self, strategy: str = DEFAULT_STRATEGY, chunking: str | None = None) -> None:
        """Load now what ``strategy`` needs (embedder; spaCy, Neo4j and the in-process graph of ``chunking``
        for graph strategies), so a first query's latency is the query's alone. An unknown strategy is the
        same QueryError as a query's; a graph that cannot load is left for the query to report as a fallback."""
        retriever = self.retriever(strategy, chunking)
        if retriever.needs_embedder:
            _ = self.context.embedder
        self.context.reranker()  # a model that cannot load is reported in each result, not raised here
        if retriever.needs_graph:
            store, _why = self.context.graph()
            try:
                _ = self.context.nlp
                if store is not None:
                    graph_snapshot(self.context, store, retriever.chunking)
            except RagloomError as e:
                log.warning("graph retrieval not warmed: %s", e)

    # dynamic items, promotion and health: what the service's routers call (they never reach into context) --
    def inject(self, strategies: Sequence[str], text: str, scope: Scope, **options: Any) -> InjectedItem:
        """Embed ``text`` once and write it into ``strategies``' collections as a dynamic item of ``scope``
        (``ragloom.dynamic.build_chunks`` checks everything first)."""
        return dynamic.inject(self.context.vectors, self.context.embedder, strategies, text, scope, **options)

    def delete_item(self, strategies: Sequence[str], item_id: str, owner: Scope) -> int:
        """Delete an injected item that lies within ``owner``'s subtree; chunks deleted (0: none of it there)."""
        return dynamic.delete_item(self.context.vectors, strategies, item_id, owner)

    def sweep_expired(self, strategies: Sequence[str]) -> int:
        """Delete injected items past their TTL (queries never return them in any case); chunks deleted."""
        return dynamic.sweep_expired(self.context.vectors, strategies)

    def promote(self, strategies: Sequence[str], document_id: str, owner: Scope, target: Scope) -> Promotion:
        """Move a document within ``owner``'s subtree up to ``target`` in both stores (``ragloom.promotion``)."""
        graph, why = self.context.graph()
        if graph is None:
            log.warning("promotion of %r refused: %s", document_id, why)
        return promote(self.context.vectors, graph, strategies, document_id, owner, target)

    def is_indexed(self, chunking: str, document_id: str) -> bool:
        """Whether any chunk of ``document_id`` is in ``chunking``'s collection."""

        return bool(self.context.vectors.count_where(chunking, Condition("document_id", "document_id", "eq",
                                                                          document_id)))

    def ready(self) -> dict[str, bool]:
        """Whether each store answers now (a graph that failed to connect earlier is asked afresh), within
        ``RAGLOOM_READY_TIMEOUT_SECONDS``: a store that has not answered by then is "not ready". A silent store
        holds a check for up to its driver's own limits (tens of seconds), so each store has at most one check
        in flight, on a thread of its own; the next probe waits on that one instead of starting another."""
        deadline = time.monotonic() + self.settings.ready_timeout_seconds
        checks = {"weaviate": self.context.vectors.ready, "neo4j": self._graph_ready}
        probes = {name: self._probes.start(name, check) for name, check in checks.items()}
        return {name: _answer(probe, deadline) for name, probe in probes.items()}

    def _graph_ready(self) -> bool:
        graph, _why = self.context.graph()
        if graph is not None:
            return bool(graph.ready())
        from ragloom.stores.neo4j import Neo4jStore  # deferred: the driver is loaded only when asked

        try:
            Neo4jStore.connect(self.settings).close()
            return True
        except RagloomError:
            return False

    async def aquery(self, query: str | Query, /, **fields: Any) -> RetrievalResult:
        """``query`` for async callers: it runs on a bounded pool of worker threads, so the event loop never
        blocks on a store or the model. Strategies that walk the in-process graph (``needs_graph``: graph_rag,
        multi_hop) have a small pool of their own (``RAGLOOM_SERVICE_GRAPH_WORKERS``): their work is mostly Python,
        and more threads only contend for the interpreter. Every other strategy, mostly waiting on the stores, runs
        on the shared pool (``RAGLOOM_SERVICE_WORKERS``)."""
        parsed = self.parse(query, fields)
        pool = "graph" if strategy_class(parsed.strategy).needs_graph else "api"
        return await self._run_on(pool, self.retrieve, parsed)

    async def run_blocking(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Any blocking call of this API (or its stores) on the shared bounded worker pool."""
        return await self._run_on("api", fn, *args, **kwargs)

    async def _run_on(self, pool: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if pool not in self._pools:
            workers = self.settings.service_graph_workers if pool == "graph" else self.settings.service_workers
            self._pools[pool] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"ragloom-{pool}")
        return await asyncio.get_running_loop().run_in_executor(self._pools[pool],
                                                                functools.partial(fn, *args, **kwargs))

    def context_text(self, result: RetrievalResult, token_budget: int = 1500) -> tuple[str, list[Citation]]:
        """The result as numbered passages within ``token_budget`` tokens of the embedding model's tokenizer."""

        return assemble_context(result, token_budget, get_token_counter(self.settings.embed_model).count)

    # lifecycle ----------------------------------------------------------------------------------------
    def close(self) -> None:
        while self._pools:
            self._pools.popitem()[1].shutdown(wait=True)
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


def _result_cache(settings: Settings) -> Any:
    """The result cache the settings ask for (RAGLOOM_RESULT_CACHE_TTL_SECONDS > 0), else None."""
    if settings.result_cache_ttl_seconds <= 0:
        return None

    return ResultCache(settings.result_cache_ttl_seconds, settings.result_cache_size)


class _Probes:
    """The readiness check of each store, at most one in flight per store, each on a daemon thread (a check stuck
    on a silent store never holds up exit)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, Future[bool]] = {}

    def start(self, name: str, check: Callable[[], bool]) -> Future[bool]:
        """A new check of ``name``, or the one still running from an earlier probe."""
        with self._lock:
            probe = self._running.get(name)
            if probe is None or probe.done():
                probe = self._running[name] = Future()
                threading.Thread(target=_run_check, args=(check, probe), name="ragloom-ready", daemon=True).start()
            return probe


def _run_check(check: Callable[[], bool], probe: Future[bool]) -> None:
    try:
        probe.set_result(bool(check()))
    except Exception:  # noqa: BLE001 - a health probe: every failure means not ready
        log.exception("a readiness check failed")
        probe.set_result(False)


def _answer(probe: Future[bool], deadline: float) -> bool:
    """The check's answer, or False when it has not answered by ``deadline`` (``time.monotonic``)."""
    try:
        return probe.result(timeout=max(0.0, deadline - time.monotonic()))
    except TimeoutError:
        return False
