"""Retrieval: one Retriever interface, registered strategies, filters, fusion and post-processing."""

from ragloom.filters import build_where, parse_filters
from ragloom.options import Option
from ragloom.retrieval.adaptive import AdaptiveRetriever
from ragloom.retrieval.base import (
    POSTPROCESS_DEFAULTS,
    POSTPROCESS_OPTIONS,
    RetrievalContext,
    Retriever,
    SearchRequest,
    available_strategies,
    describe_strategies,
    get_retriever,
    options_for,
    options_markdown,
    register_retrieval_strategy,
    strategy_class,
)
from ragloom.retrieval.bm25 import BM25Retriever
from ragloom.retrieval.dense import DenseRetriever
from ragloom.retrieval.fusion import fuse, rrf, weighted
from ragloom.retrieval.generated import HydeRetriever, MultiQueryRetriever
from ragloom.retrieval.graph_rag import GraphRagRetriever
from ragloom.retrieval.hierarchical import HierarchicalRetriever
from ragloom.retrieval.hybrid import HybridRetriever
from ragloom.retrieval.multi_hop import MultiHopRetriever
from ragloom.retrieval.postprocess import Citation, assemble_context, lost_in_the_middle, remove_near_duplicates
from ragloom.retrieval.raptor import RaptorRetriever

__all__ = [
    "POSTPROCESS_DEFAULTS",
    "POSTPROCESS_OPTIONS",
    "AdaptiveRetriever",
    "BM25Retriever",
    "Citation",
    "DenseRetriever",
    "GraphRagRetriever",
    "HierarchicalRetriever",
    "HybridRetriever",
    "HydeRetriever",
    "MultiQueryRetriever",
    "Option",
    "RaptorRetriever",
    "MultiHopRetriever",
    "RetrievalContext",
    "Retriever",
    "SearchRequest",
    "assemble_context",
    "available_strategies",
    "build_where",
    "describe_strategies",
    "fuse",
    "get_retriever",
    "lost_in_the_middle",
    "options_for",
    "options_markdown",
    "parse_filters",
    "register_retrieval_strategy",
    "remove_near_duplicates",
    "rrf",
    "strategy_class",
    "weighted",
]
