"""bm25: keyword search over the chunk text and heading path (Weaviate's BM25F)."""

from __future__ import annotations

from typing import Any

from ragloom.retrieval import lanes
from ragloom.retrieval.base import Retriever, SearchRequest, register_retrieval_strategy
from ragloom.types import RetrievedItem


@register_retrieval_strategy("bm25")
class BM25Retriever(Retriever):
    """Weaviate BM25; ``score`` and ``lane_scores["bm25"]`` are BM25 scores (unbounded)."""

    summary = "keyword search over the chunk text and heading path (Weaviate's BM25F)"

    needs_embedder = False

    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        return lanes.bm25(request, self.chunking, request.fetch_k)
