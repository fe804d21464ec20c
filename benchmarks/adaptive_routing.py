"""Routing overhead of the adaptive strategy, against a plain dense query measured in the same run.

    python benchmarks/adaptive_routing.py --prefix AdaptScifact [--queries 100]

The trained router is the one the service would load (RAGLOOM_ROUTER_MODEL in the artifacts folder); rules
when there is none.

Needs an already-ingested collection (e.g. one a `ragloom eval --namespace AdaptScifact` run left). Per
query: the whole route stage (two 10-candidate lane queries + features + the router's decision; the rules read
the query's form only, so for them no lane query), the
decision alone (features + router on lane results already fetched), and the baseline (a dense search with
the same defaults). Prints medians and p95 in ms and route/baseline ratios. ADR-003's target: p95 <= 10 ms
for the decision without an LLM.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data" / "scifact"


def main() -> None:
    from ragloom.api import Ragloom
    from ragloom.evaluation.datasets import load_dataset
    from ragloom.retrieval import get_retriever, lanes
    from ragloom.retrieval.adaptive import DEFAULT_CHAIN, query_features
    from ragloom.retrieval.routing import LearnedRouter, RouterError, RuleRouter
    from ragloom.retrieval.routing.features import SIGNAL_K, features
    from ragloom.settings import Settings
    from ragloom.types import Scope

    p = argparse.ArgumentParser()
    p.add_argument("--prefix", default="AdaptScifact")
    p.add_argument("--queries", type=int, default=100)
    args = p.parse_args()
    settings = dataclasses.replace(Settings.from_env(), collection_prefix=args.prefix)
    try:
        router = LearnedRouter.load(settings.resolved_router_model)
    except RouterError:
        router = RuleRouter()
    queries = [q.text for q in load_dataset(DATA, max_queries=args.queries).queries]
    chain = list(DEFAULT_CHAIN)
    route_ms, decide_ms, base_ms = [], [], []
    with Ragloom(settings) as rag:
        dense = get_retriever("dense", rag.context, "recursive", rerank=False, abstain=False)
        query_features(rag.context, "recursive", "warm up")
        from ragloom.retrieval.base import SearchRequest

        for q in queries:
            rag.context.query_vector(q)  # the embedding is shared by every path: time what routing adds
            t = time.perf_counter()
            dense.search(q, k=10)
            base_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            # as the adaptive strategy does: lane queries only for a router that reads their signals
            vector = query_features(rag.context, "recursive", q, with_lanes=router.reads_signals)
            router.route(q, vector, chain)
            route_ms.append((time.perf_counter() - t) * 1000)
            req = SearchRequest(query=q, k=SIGNAL_K, scope=Scope.from_path(None), filters=None, chunking="recursive",
                                context=rag.context, fetch_k=SIGNAL_K, include_vectors=False)
            d, b = lanes.dense(req, "recursive", SIGNAL_K), lanes.bm25(req, "recursive", SIGNAL_K)
            t = time.perf_counter()
            router.route(q, features(q, d, b), chain)
            decide_ms.append((time.perf_counter() - t) * 1000)

    def line(name: str, xs: list[float]) -> str:
        return f"{name:<34} p50 {np.median(xs):7.2f} ms  p95 {np.percentile(xs, 95):7.2f} ms"

    print(f"{len(queries)} SciFact queries, router {router.kind}, collection {args.prefix}Recursive")
    print(line("baseline: dense search (k=10)", base_ms))
    print(line("route stage (2 lanes + decide)" if router.reads_signals else "route stage (decide)", route_ms))
    print(line("decision only (features + model)", decide_ms))
    print(f"route stage / baseline, medians: {np.median(route_ms) / np.median(base_ms):.2f}")


if __name__ == "__main__":
    main()
