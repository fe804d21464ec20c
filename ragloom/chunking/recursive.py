"""Recursive chunking: cut at the coarsest separator that fits (headings, paragraphs, sentences, words)."""

from __future__ import annotations

from typing import Any

from ragloom.chunking.base import DEFAULT_CHUNK_SIZE, DEFAULT_OVERLAP, Chunker, Span, register_chunker
from ragloom.chunking.tokens import TokenCounter
from ragloom.errors import ChunkingError
from ragloom.types import Document


@register_chunker("recursive")
class RecursiveChunker(Chunker):
    """Neighbouring chunks share up to ``overlap`` tokens (semantic-text-splitter's overlap)."""

    def __init__(self, *, chunk_size: int = DEFAULT_CHUNK_SIZE, overlap: int = DEFAULT_OVERLAP,
                 counter: TokenCounter | None = None) -> None:
        super().__init__(chunk_size=chunk_size, counter=counter)
        if not 0 <= overlap < chunk_size // 2:
            raise ChunkingError(f"recursive: overlap={overlap} must be >= 0 and below half of chunk_size={chunk_size}")
        self.overlap = overlap

    def params(self) -> dict[str, Any]:
        return {**super().params(), "overlap": self.overlap}

    def split(self, document: Document) -> list[Span]:
        pieces = self.split_range(document, 0, len(document.text), self.chunk_size, self.overlap)
        return [Span(start, end) for start, end in pieces]
