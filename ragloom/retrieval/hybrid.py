"""hybrid: Weaviate's native hybrid (BM25 + vector, alpha, fusion type), or client-side fusion of any lanes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragloom.errors import RagloomError, RetrievalError, StoreError
from ragloom.options import Option
from ragloom.retrieval import fusion, lanes
from ragloom.retrieval.base import Retriever, SearchRequest, register_retrieval_strategy
from ragloom.types import RetrievedItem


@register_retrieval_strategy("hybrid")
class HybridRetriever(Retriever):
    """Native mode (default): one Weaviate hybrid query; ``lane_scores["hybrid"]`` is Weaviate's fused score.

    ``client_fusion=True``: each of ``lanes`` fetches ``k * lane_multiplier`` candidates and they are fused
    here with ``fusion`` (``rrf`` with ``rrf_k`` and per-lane ``weights``, ``weighted`` min-max with
    ``weights``, or ``linear`` min-max with ``sparse_weight``); every item keeps each lane's own score in
    ``lane_scores``.

    A failing lane (store error, embedder error) does not fail the query: the other lanes are fused, and
    ``fallbacks`` names the lane and why. Native mode that fails runs the dense and BM25 lanes separately.
    Only when every lane fails does the query fail.
    """

    summary = "Weaviate's native hybrid (BM25 + vector), or client-side fusion of any lanes"

    declared_options: dict[str, Option] = {
        "alpha": lanes.ALPHA,
        "fusion_type": lanes.FUSION_TYPE,
        "client_fusion": Option(False, help="run the lanes separately and fuse them here instead of natively"),
        "lanes": Option(("dense", "bm25"), choices=lanes.LANES, min_items=1,
                        help="client fusion: the lanes to run, each once"),
        "fusion": Option("rrf", choices=fusion.METHODS,
                         help="client fusion: reciprocal rank (rrf), weighted or linear min-max of lane scores"),
        "sparse_weight": Option(0.5, min=0.0, max=1.0,
                                help="linear fusion: weight of the BM25 lane; the other lanes get 1 - this"),
        "rrf_k": Option(fusion.DEFAULT_RRF_K, min=0, max=10_000,
                        help="client fusion: the k in weight / (rrf_k + rank)"),
        "weights": Option(None, kind=dict, of=float, min=0.0, max=100.0,
                          help="client fusion: {lane: weight >= 0}, 1 for a lane not named"),
        "lane_multiplier": Option(3, min=1, max=20, help="client fusion: each lane fetches k x this many candidates"),
    }

    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        if not options["client_fusion"]:
            try:
                return lanes.hybrid(request, self.chunking, request.fetch_k, alpha=options["alpha"],
                                    fusion_type=options["fusion_type"])
            except RagloomError as e:
                request.fallbacks.append("hybrid->client fusion of dense, bm25: native hybrid failed: "
                                         f"{request.context.error_text(e)}")
                options = {**options, "lanes": ("dense", "bm25")}
        return fuse_lanes(request, self.chunking, options["lanes"], request.fetch_k, options)


def fuse_lanes(request: SearchRequest, collection: str, lane_names: tuple[str, ...], k: int,
               options: Mapping[str, Any]) -> list[RetrievedItem]:
    """Run each lane for ``k * lane_multiplier`` candidates and fuse them (client side)."""
    weights = options["weights"]
    if weights is not None and (not isinstance(weights, Mapping) or set(weights) - set(lane_names)):
        raise RetrievalError(f"hybrid: weights={weights!r} must map some of the lanes {list(lane_names)} to numbers")
    per_lane = k * options["lane_multiplier"]
    ranked: dict[str, list[RetrievedItem]] = {}
    failed: dict[str, str] = {}
    errors: list[RagloomError] = []
    for name in lane_names:
        try:
            ranked[name] = lanes.run(name, request, collection, per_lane, alpha=options["alpha"],
                                     fusion_type=options["fusion_type"])
        except RagloomError as e:  # one lane down degrades the query; every lane down fails it
            failed[name] = str(e)
            errors.append(e)
    if not ranked:
        # the stores failing is the server's fault (StoreError: the service's 503), anything else the request's
        kind = StoreError if all(isinstance(e, StoreError) for e in errors) else RetrievalError
        raise kind("hybrid: every lane failed: " + "; ".join(f"{n}: {why}" for n, why in failed.items()))
    for name, why in failed.items():
        request.fallbacks.append(f"hybrid: lane {name} failed, fused {', '.join(ranked)}: "
                                 f"{request.context.error_text(why)}")
    weights = {lane: w for lane, w in weights.items() if lane in ranked} if weights else weights
    with request.stage("fusion"):
        return fusion.fuse(ranked, options["fusion"], k=k, rrf_k=options["rrf_k"], weights=weights,
                           sparse_weight=options["sparse_weight"])
