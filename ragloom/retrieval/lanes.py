"""The store queries behind each lane (dense, bm25, native hybrid), shared by every strategy.

Each goes through ``request.where(...)``, so the scope filter is on every query, and records its lane and
its timing on the request. ``ids_only``: the items carry chunk id and scores only (the store's ``ids_only``).
"""

from __future__ import annotations

from ragloom.errors import RetrievalError
from ragloom.filters import Node
from ragloom.options import Option
from ragloom.retrieval.base import SearchRequest, store_call
from ragloom.types import RetrievedItem

LANES = ("dense", "bm25", "hybrid")
HYBRID_FUSION_TYPES = ("relative_score", "ranked")

# the hybrid lane's two knobs, declared once for every strategy that runs the lane
ALPHA = Option(0.5, min=0.0, max=1.0, help="the hybrid lane's balance: 0 = BM25 only, 1 = vector only")
FUSION_TYPE = Option("relative_score", choices=HYBRID_FUSION_TYPES,
                     help="the hybrid lane's fusion inside Weaviate: scores min-max normalized, or ranks")


def _tag(items: list[RetrievedItem], lane: str) -> list[RetrievedItem]:
    """Each item's lane score recorded; equal scores ordered by chunk id (the store's tie order is arbitrary)."""
    for item in items:
        item.lane_scores.setdefault(lane, item.score)
    return sorted(items, key=lambda item: (-item.score, item.chunk_id))


def dense(request: SearchRequest, collection: str, k: int, *extra: Node | None,
          ids_only: bool = False) -> list[RetrievedItem]:
    vector = request.vector()
    where = request.where(*extra)
    request.lane("dense")
    return _tag(store_call(request, "dense", lambda: request.context.vectors.near_vector(
        collection, vector, k, where=where, include_vectors=request.include_vectors, ids_only=ids_only)), "dense")


def bm25(request: SearchRequest, collection: str, k: int, *extra: Node | None,
         ids_only: bool = False) -> list[RetrievedItem]:
    where = request.where(*extra)
    request.lane("bm25")
    return _tag(store_call(request, "bm25", lambda: request.context.vectors.bm25(
        collection, request.query, k, where=where, include_vectors=request.include_vectors, ids_only=ids_only)),
        "bm25")


def hybrid(request: SearchRequest, collection: str, k: int, *extra: Node | None, alpha: float = 0.5,
           fusion_type: str = "relative_score", ids_only: bool = False) -> list[RetrievedItem]:
    vector = request.vector()
    where = request.where(*extra)
    request.lane("hybrid")
    return _tag(store_call(request, "hybrid", lambda: request.context.vectors.hybrid(
        collection, request.query, vector, k, alpha=alpha, fusion=fusion_type, where=where,
        include_vectors=request.include_vectors, ids_only=ids_only)), "hybrid")


def run(lane: str, request: SearchRequest, collection: str, k: int, *extra: Node | None, alpha: float = 0.5,
        fusion_type: str = "relative_score", ids_only: bool = False) -> list[RetrievedItem]:
    """One lane by name (``alpha`` and ``fusion_type`` were checked against the strategy's declared options)."""
    if lane == "dense":
        return dense(request, collection, k, *extra, ids_only=ids_only)
    if lane == "bm25":
        return bm25(request, collection, k, *extra, ids_only=ids_only)
    if lane == "hybrid":
        return hybrid(request, collection, k, *extra, alpha=alpha, fusion_type=fusion_type, ids_only=ids_only)
    raise RetrievalError(f"unknown lane {lane!r}; use one of {', '.join(LANES)}")
