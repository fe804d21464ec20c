"""hybrid: Weaviate's native hybrid (BM25 + vector, alpha, fusion type), or client-side fusion of any lanes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragloom.errors import RetrievalError
from ragloom.retrieval import fusion, lanes
from ragloom.retrieval.base import Retriever, SearchRequest, register_retrieval_strategy
from ragloom.retrieval.options import Option
from ragloom.types import RetrievedItem


@register_retrieval_strategy("hybrid")
class HybridRetriever(Retriever):
    """Native mode (default): one Weaviate hybrid query; ``lane_scores["hybrid"]`` is Weaviate's fused score.

    ``client_fusion=True``: each of ``lanes`` fetches ``k * lane_multiplier`` candidates and they are fused
    here with ``fusion`` (``rrf`` with ``rrf_k``, or ``weighted`` min-max with ``weights``); every item keeps
    each lane's own score in ``lane_scores``.
    """

    summary = "Weaviate's native hybrid (BM25 + vector), or client-side fusion of any lanes"

    declared_options: dict[str, Option] = {
        "alpha": Option(0.5, min=0.0, max=1.0, help="native hybrid: 0 = BM25 only, 1 = vector only"),
        "fusion_type": Option("relative_score", choices=lanes.HYBRID_FUSION_TYPES,
                              help="native hybrid: how Weaviate fuses its BM25 and vector scores"),
        "client_fusion": Option(False, help="run the lanes separately and fuse them here instead of natively"),
        "lanes": Option(("dense", "bm25"), choices=lanes.LANES, min_items=1,
                        help="client fusion: the lanes to run, each once"),
        "fusion": Option("rrf", choices=fusion.METHODS,
                         help="client fusion: reciprocal rank (rrf) or weighted min-max of lane scores"),
        "rrf_k": Option(fusion.DEFAULT_RRF_K, min=0, help="client fusion: the k in weight / (rrf_k + rank)"),
        "weights": Option(None, kind=dict, help="client fusion: {lane: weight >= 0}, 1 for a lane not named"),
        "lane_multiplier": Option(3, min=1, help="client fusion: each lane fetches k x this many candidates"),
    }

    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        if not options["client_fusion"]:
            return lanes.hybrid(request, self.chunking, request.fetch_k, alpha=options["alpha"],
                                fusion_type=options["fusion_type"])
        return fuse_lanes(request, self.chunking, options["lanes"], request.fetch_k, options)


def fuse_lanes(request: SearchRequest, collection: str, lane_names: tuple[str, ...], k: int,
               options: Mapping[str, Any]) -> list[RetrievedItem]:
    """Run each lane for ``k * lane_multiplier`` candidates and fuse them (client side)."""
    weights = options["weights"]
    if weights is not None and (not isinstance(weights, Mapping) or set(weights) - set(lane_names)):
        raise RetrievalError(f"hybrid: weights={weights!r} must map some of the lanes {list(lane_names)} to numbers")
    per_lane = k * options["lane_multiplier"]
    ranked = {name: lanes.run(name, request, collection, per_lane, alpha=options["alpha"],
                              fusion_type=options["fusion_type"]) for name in lane_names}
    with request.stage("fusion"):
        return fusion.fuse(ranked, options["fusion"], k=k, rrf_k=options["rrf_k"], weights=weights)
