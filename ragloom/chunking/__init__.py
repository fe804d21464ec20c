"""Documents -> Chunks: four chunkers behind one interface (more via register_chunker), sized in tokens."""

from ragloom.chunking.base import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_OVERLAP,
    Chunker,
    HeadingIndex,
    Span,
    available_chunkers,
    check_chunking_settings,
    chunk_levels,
    chunker_for,
    chunker_option_names,
    get_chunker,
    register_chunker,
)
from ragloom.chunking.headered import HeaderedChunker
from ragloom.chunking.hierarchical import HierarchicalChunker
from ragloom.chunking.recursive import RecursiveChunker
from ragloom.chunking.semantic import SemanticChunker
from ragloom.chunking.tokens import TokenCounter, get_token_counter

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_OVERLAP",
    "Chunker",
    "HeaderedChunker",
    "HeadingIndex",
    "HierarchicalChunker",
    "RecursiveChunker",
    "SemanticChunker",
    "Span",
    "TokenCounter",
    "available_chunkers",
    "check_chunking_settings",
    "chunk_levels",
    "chunker_for",
    "chunker_option_names",
    "get_chunker",
    "get_token_counter",
    "register_chunker",
]
