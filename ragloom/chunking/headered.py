"""Headered chunking: one chunk per Markdown/HTML heading section, sub-split when a section is too long."""

from __future__ import annotations

from typing import Any

from ragloom.chunking.base import DEFAULT_CHUNK_SIZE, Chunker, HeadingIndex, Span, register_chunker
from ragloom.chunking.tokens import TokenCounter
from ragloom.types import HEADING_SEPARATOR, Document


@register_chunker("headered")
class HeaderedChunker(Chunker):
    """Chunks never cross a heading. With ``heading_prefix`` the embedded text starts with the heading path
    ("Part 2 > 2.1 Financial resources") so a sub-split piece still says where it belongs; ``Chunk.text``
    stays the exact span. The prefix counts against ``chunk_size`` and takes at most half of it."""

    def __init__(self, *, chunk_size: int = DEFAULT_CHUNK_SIZE, heading_prefix: bool = True,
                 counter: TokenCounter | None = None) -> None:
        super().__init__(chunk_size=chunk_size, counter=counter)
        self.heading_prefix = heading_prefix

    def params(self) -> dict[str, Any]:
        return {**super().params(), "heading_prefix": self.heading_prefix}

    def split(self, document: Document) -> list[Span]:
        index = HeadingIndex(document)
        spans: list[Span] = []
        for start, end in index.sections():
            prefix = self.prefix(index.path_for(start, end))
            budget = self.chunk_size - (self.counter.count(prefix) - self.counter.special_tokens if prefix else 0)
            if self.counter.count(document.text[start:end]) <= budget:
                spans.append(Span(start, end, embed_prefix=prefix))
                continue
            # Round the budget down so sections share a few cached splitters instead of one per prefix length.
            pieces = self.split_range(document, start, end, budget - budget % 16 if budget > 64 else budget)
            spans.extend(Span(a, b, embed_prefix=prefix) for a, b in pieces)
        return spans

    def prefix(self, heading_path: list[str]) -> str:
        if not self.heading_prefix or not heading_path:
            return ""
        path = self.counter.truncate(HEADING_SEPARATOR.join(heading_path), self.chunk_size // 2)
        return f"{path}\n\n" if path else ""
