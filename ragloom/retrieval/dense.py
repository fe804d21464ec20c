"""dense: nearest neighbours of the query embedding (cosine)."""

from __future__ import annotations

from typing import Any

from ragloom.retrieval import lanes
from ragloom.retrieval.base import Retriever, SearchRequest, register_retrieval_strategy
from ragloom.types import RetrievedItem


@register_retrieval_strategy("dense")
class DenseRetriever(Retriever):
    """Weaviate near-vector search; ``score`` and ``lane_scores["dense"]`` are cosine similarities."""

    summary = "nearest neighbours of the query embedding (cosine)"

    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        return lanes.dense(request, self.chunking, request.fetch_k)
