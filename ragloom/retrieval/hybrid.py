"""hybrid: Weaviate's native hybrid (BM25 + vector, alpha, fusion type), or client-side fusion of any lanes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragloom.errors import RetrievalError
from ragloom.retrieval import fusion, lanes
from ragloom.retrieval.base import Retriever, SearchRequest, register_retrieval_strategy
from ragloom.types import RetrievedItem


@register_retrieval_strategy("hybrid")
class HybridRetriever(Retriever):
    """Native mode (default): one Weaviate hybrid query; ``lane_scores["hybrid"]`` is Weaviate's fused score.

    ``client_fusion=True``: each of ``lanes`` fetches ``k * lane_multiplier`` candidates and they are fused
    here with ``fusion`` (``rrf`` with ``rrf_k``, or ``weighted`` min-max with ``weights``); every item keeps
    each lane's own score in ``lane_scores``.
    """

    defaults: dict[str, Any] = {
        "alpha": 0.5,  # native: 0 = BM25 only, 1 = vector only
        "fusion_type": "relative_score",  # native: relative_score | ranked
        "client_fusion": False,
        "lanes": ("dense", "bm25"),  # client fusion: any of dense, bm25, hybrid
        "fusion": "rrf",  # client fusion: rrf | weighted
        "rrf_k": 60,
        "weights": None,  # client fusion: {lane: weight}, default 1 each
        "lane_multiplier": 3,
    }

    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        if not options["client_fusion"]:
            return lanes.hybrid(request, self.chunking, request.fetch_k, alpha=options["alpha"],
                                fusion_type=options["fusion_type"])
        return fuse_lanes(request, self.chunking, options["lanes"], request.fetch_k, options)


def fuse_lanes(request: SearchRequest, collection: str, lane_names: tuple[str, ...], k: int,
               options: Mapping[str, Any]) -> list[RetrievedItem]:
    """Run each lane for ``k * lane_multiplier`` candidates and fuse them (client side)."""
    if not lane_names or len(set(lane_names)) != len(lane_names):
        raise RetrievalError(f"hybrid: lanes={list(lane_names)} must be distinct names from {', '.join(lanes.LANES)}")
    if options["lane_multiplier"] < 1:
        raise RetrievalError(f"hybrid: lane_multiplier={options['lane_multiplier']} must be >= 1")
    weights = options["weights"]
    if weights is not None and (not isinstance(weights, Mapping) or set(weights) - set(lane_names)):
        raise RetrievalError(f"hybrid: weights={weights!r} must map some of the lanes {list(lane_names)} to numbers")
    per_lane = k * options["lane_multiplier"]
    ranked = {name: lanes.run(name, request, collection, per_lane, alpha=options["alpha"],
                              fusion_type=options["fusion_type"]) for name in lane_names}
    with request.stage("fusion"):
        return fusion.fuse(ranked, options["fusion"], k=k, rrf_k=options["rrf_k"], weights=weights)
