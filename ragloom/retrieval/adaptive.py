"""adaptive: route each query to a strategy, check the result, and retry with the next strategy when it is weak.

Routing reads the query's form and two cheap lane queries (dense and BM25, 10 candidates each; see
``ragloom.retrieval.routing.features``). The router is the learned model when one is trained (``ragloom router train``,
loaded from RAGLOOM_ROUTER_MODEL inside the artifacts folder: a setting, never an option), the LLM selector
with ``router=llm`` and a configured model, else rules. The chosen strategy runs with its own defaults on this
retriever's chunking. The quality check (best dense cosine, query-term coverage; margin and diversity when
their thresholds are set) may send the query to the next untried strategy of ``chain``, at most
``max_retries`` times; the best try by quality is returned. ``info`` records the route, every try (its
quality, why it was weak, its first 10 distinct documents) and the try returned; ``ragloom.retrieval.routing.monitor``
counts them over many queries.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from ragloom.errors import RagloomError, RetrievalError
from ragloom.options import Option
from ragloom.retrieval import lanes
from ragloom.retrieval.base import (
    Retriever,
    SearchRequest,
    available_strategies,
    register_retrieval_strategy,
    strategy_class,
)
from ragloom.retrieval.routing.features import FORM_NAMES, SIGNAL_K, named
from ragloom.retrieval.routing.features import features as route_features
from ragloom.retrieval.routing.quality import assess, weak_reasons
from ragloom.retrieval.routing.router import LLMRouter, RuleRouter
from ragloom.types import RetrievedItem, Scope

DEFAULT_CHAIN = ("hybrid", "graph_rag", "dense", "bm25")
ROUTERS = ("auto", "rules", "learned", "llm")
TRY_DOCUMENTS = 10  # each try records its first distinct documents: evaluation scores tries at @10


@register_retrieval_strategy("adaptive")
class AdaptiveRetriever(Retriever):
    summary = "routes each query to a strategy (learned, LLM or rules) and retries weak results with the next one"

    declared_options: dict[str, Option] = {
        "chain": Option(DEFAULT_CHAIN, min_items=1, help="the strategies routed among, in retry order"),
        "router": Option("auto", choices=ROUTERS, help="auto: the trained model if there is one, else rules; "
                         "llm: the configured LLM chooses (rules when it fails)"),
        "max_retries": Option(1, min=0, max=5, help="corrective retries with the next untried strategy of chain"),
        "min_cosine": Option(0.3, min=0.0, max=1.0, help="retry when the top items' best dense cosine is below "
                             "this; 0 = off"),
        "min_coverage": Option(0.0, min=0.0, max=1.0, help="retry when fewer of the query's content terms appear "
                               "in the top items' text; 0 = off (at 0.5 the retries lost on every dev set)"),
        "min_margin": Option(0.0, min=0.0, max=1.0, help="retry when the first two items' cosine margin is "
                             "below this; 0 = off"),
        "min_diversity": Option(0.0, min=0.0, max=1.0, help="retry when the top items' share of distinct "
                                "documents is below this; 0 = off"),
    }

    def __init__(self, context: Any, chunking: str | None = None, **options: Any) -> None:
        super().__init__(context, chunking, **options)
        self._routers: dict[str, Any] = {}

    # the router -------------------------------------------------------------------------------------------
    def router(self, kind: str) -> tuple[Any, str]:
        """(the router for ``kind``, a note on why it is not the one asked for, or "")."""
        if kind not in self._routers:
            self._routers[kind] = self._make_router(kind)
        return self._routers[kind]

    def _make_router(self, kind: str) -> tuple[Any, str]:
        if kind == "llm":
            client, why = self.context.llm()  # the API's own client: opened once, closed with it
            if client is None:
                return RuleRouter(), f"router=llm but {why}: rules"
            summaries = {name: strategy_class(name).summary for name in available_strategies()}
            return LLMRouter(client, summaries), ""
        if kind == "rules":
            return RuleRouter(), ""
        learned, why = self.context.learned_router()  # the configured file only (RAGLOOM_ROUTER_MODEL)
        if learned is not None:
            return learned, ""
        if kind == "learned":
            raise RetrievalError(f"adaptive: router=learned, but {why}")
        return RuleRouter(), f"{why}: rules"

    # the search -------------------------------------------------------------------------------------------
    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        chain = check_chain(options["chain"])
        started = time.perf_counter()
        with request.stage("route"):
            router, note = self.router(options["router"])
            # the lane queries' signals only for a router that reads them (the rules and the LLM do not)
            vector = signals(request, self.chunking, with_lanes=router.reads_signals)
            try:
                strategy, why = router.route(request.query, vector, chain)
            except RagloomError as e:  # an LLM that fails or answers outside the chain: the rules decide
                note = f"{router.kind} router failed ({request.context.error_text(e)}): rules"
                router = RuleRouter()
                strategy, why = router.route(request.query, vector, chain)
        route = {"router": router.kind, "strategy": strategy, "why": why, "note": note or None,
                 "ms": round((time.perf_counter() - started) * 1000, 2),
                 "features": {k: v for k, v in named(vector).items() if router.reads_signals or k in FORM_NAMES}}
        tries: list[dict[str, Any]] = []
        results: list[list[RetrievedItem]] = []
        tried: list[str] = []
        while True:
            tried.append(strategy)
            items, error = self._run(request, strategy)
            quality = assess(request.query, items, request.vector())
            reasons = [f"failed: {error}"] if error else weak_reasons(
                quality, len(items), min_cosine=options["min_cosine"], min_coverage=options["min_coverage"],
                min_margin=options["min_margin"], min_diversity=options["min_diversity"])
            tries.append({"strategy": strategy, "quality": quality.as_dict(), "weak": reasons,
                          "documents": _documents(items, TRY_DOCUMENTS)})
            results.append(items)
            following = [s for s in chain if s not in tried]
            if not reasons or len(tried) > options["max_retries"] or not following:
                break
            strategy = following[0]
        best = max(range(len(results)), key=lambda i: (bool(results[i]), _score(tries[i]), -i))
        if not results[best] and all(t["weak"] and t["weak"][0].startswith("failed") for t in tries):
            raise RetrievalError("adaptive: every strategy tried failed: " +
                                 "; ".join(f"{t['strategy']}: {t['weak'][0]}" for t in tries))
        request.info["adaptive"] = {"route": route, "tries": tries, "used": tries[best]["strategy"],
                                    "retried": len(tries) > 1}
        return results[best]

    def _run(self, request: SearchRequest, strategy: str) -> tuple[list[RetrievedItem], str]:
        cls = strategy_class(strategy)
        inner = cls(self.context, chunking=self.chunking)
        own = {k: v for k, v in inner.options.items() if k in cls.declared_options}
        # every candidate: the tries are compared on their items (enough=None)
        sub = dataclasses.replace(request, lanes_run=[], fallbacks=[], timings_ms={}, info={}, enough=None)
        try:
            items = inner.get_search_results(sub, **own)
        except RagloomError as e:
            return [], request.context.error_text(e)
        finally:
            for lane in sub.lanes_run:
                request.lane(lane)
            request.fallbacks.extend(f"{strategy}: {f}" for f in sub.fallbacks)
            for stage, ms in sub.timings_ms.items():
                request.timings_ms[f"{strategy}.{stage}"] = request.timings_ms.get(f"{strategy}.{stage}", 0.0) + ms
            if sub.info:
                request.info[strategy] = sub.info
            if request._vector is None and sub._vector is not None:
                request._vector = sub._vector
        return items, ""


def signals(request: SearchRequest, chunking: str, with_lanes: bool = True) -> Any:
    """The routing features of the request's query: its form, and one dense and one BM25 lane query (without
    ``with_lanes``, the form alone: the lane signals are left at zero)."""
    if not with_lanes:
        return route_features(request.query, [], [])
    dense = lanes.dense(request, chunking, SIGNAL_K)
    bm25 = lanes.bm25(request, chunking, SIGNAL_K)
    return route_features(request.query, dense, bm25)


def query_features(context: Any, chunking: str, query: str, with_lanes: bool = True) -> Any:
    """``signals`` outside a search (router training, the routing benchmark), with the default scope and no
    filters."""

    request = SearchRequest(query=query, k=SIGNAL_K, scope=Scope.from_path(None), filters=None,
                            chunking=chunking, context=context, fetch_k=SIGNAL_K, include_vectors=False)
    return signals(request, chunking, with_lanes)


def _documents(items: list[RetrievedItem], n: int) -> list[str]:
    """The first ``n`` distinct documents of a try, in rank order (ragloom.retrieval.routing.monitor scores tries
    by them)."""
    return list(dict.fromkeys(i.document_id for i in items))[:n]


def _score(attempt: dict[str, Any]) -> float:
    q = attempt["quality"]
    return (q["best_cosine"] or 0.0) + q["coverage"]


def check_chain(chain: tuple[str, ...]) -> tuple[str, ...]:
    """The chain's strategies must be registered, other than adaptive itself, each once."""
    known = [s for s in available_strategies() if s != "adaptive"]
    bad = [s for s in chain if s not in known]
    if bad or len(set(chain)) != len(chain):
        raise RetrievalError(f"adaptive: chain={list(chain)} must name registered strategies once each, "
                             f"from {', '.join(known)}")
    return chain
