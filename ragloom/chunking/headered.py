"""Headered chunking: one chunk per Markdown/HTML heading section, sub-split when a section is too long."""

from __future__ import annotations

from typing import Any

from ragloom.chunking.base import DEFAULT_CHUNK_SIZE, Chunker, HeadingIndex, Span, register_chunker
from ragloom.chunking.tokens import TokenCounter
from ragloom.errors import ChunkingError
from ragloom.types import HEADING_SEPARATOR, Document


@register_chunker("headered")
class HeaderedChunker(Chunker):
    """Chunks never cross a heading. With ``heading_prefix`` the embedded text starts with the heading path
    ("Part 2 > 2.1 Financial resources") so a sub-split piece still says where it belongs; ``Chunk.text``
    stays the exact span. ``chunk_size`` bounds the chunk text; the prefix (at most half of ``chunk_size``)
    goes first into the room the model reads above ``chunk_size`` (all-MiniLM-L6-v2: 256 - 200 = 56 tokens), and
    only what does not fit there shortens the text. Pieces of one sub-split section share up to ``overlap``
    tokens; sections never overlap.

    ``heading_prefix`` is off by default: with all-MiniLM-L6-v2 the path made the chunks of a section look alike
    to the dense lane and cost 0.054 of tokrecall@1024 on ObliQA dev (README, "Tuning the chunkers"); the BM25
    lane reads the title and heading path of every chunk anyway."""

    def __init__(self, *, chunk_size: int = DEFAULT_CHUNK_SIZE, heading_prefix: bool = False, overlap: int = 0,
                 prefix_levels: int = 0, counter: TokenCounter | None = None) -> None:
        super().__init__(chunk_size=chunk_size, counter=counter)
        if not 0 <= overlap < chunk_size // 2:
            raise ChunkingError(f"headered: overlap={overlap} must be >= 0 and below half of chunk_size={chunk_size}")
        self.heading_prefix = heading_prefix
        self.overlap = overlap
        if prefix_levels < 0:
            raise ChunkingError(f"headered: prefix_levels={prefix_levels} must be >= 0 (0: the whole path)")
        self.prefix_levels = prefix_levels

    def params(self) -> dict[str, Any]:
        return {**super().params(), "heading_prefix": self.heading_prefix, "overlap": self.overlap,
                "prefix_levels": self.prefix_levels}

    def split(self, document: Document) -> list[Span]:
        index = HeadingIndex(document)
        spans: list[Span] = []
        for start, end in index.sections():
            prefix = self.prefix(index.path_for(start, end))
            prefix_tokens = self.counter.count(prefix) - self.counter.special_tokens if prefix else 0
            budget = min(self.chunk_size, self.counter.max_tokens - prefix_tokens)
            if self._fits(document, start, end, budget):
                spans.append(Span(start, end, embed_prefix=prefix))
                continue
            # A budget the prefix shortened is rounded down, so sections share a few cached splitters instead
            # of one per prefix length.
            if budget < self.chunk_size and budget > 64:
                budget -= budget % 16
            overlap = min(self.overlap, (budget - self.counter.special_tokens) // 2)
            pieces = self._split_section(document, index, start, end, budget, overlap)
            spans.extend(Span(a, b, embed_prefix=prefix) for a, b in pieces)
        return spans

    def _split_section(self, document: Document, index: HeadingIndex, start: int, end: int, budget: int,
                       overlap: int) -> list[tuple[int, int]]:
        """The section's body cut to ``budget``, its heading lines joined to the first piece (re-cut smaller when
        they do not fit): no piece is a bare heading. Headings nearly as long as a chunk, or a join that still
        does not fit (token counts are not additive at the seam), fall back to cutting the section as text."""
        body = index.content_start(start, end)
        if body is None or body == start:
            return self.split_range(document, start, end, budget, overlap)
        pieces = self.split_range(document, body, end, budget, overlap)
        if self._fits(document, start, pieces[0][1], budget):
            return [(start, pieces[0][1]), *pieces[1:]]
        head = self.counter.count(document.text[start:body]) - self.counter.special_tokens
        if budget - head > max(overlap, 16):
            first = self.split_range(document, pieces[0][0], pieces[0][1], budget - head, overlap)
            if self._fits(document, start, first[0][1], budget):
                return [(start, first[0][1]), *first[1:], *pieces[1:]]
        return self.split_range(document, start, end, budget, overlap)

    def _fits(self, document: Document, start: int, end: int, budget: int) -> bool:
        return self.counter.count(document.text[start:end]) <= budget

    def prefix(self, heading_path: list[str]) -> str:
        if not self.heading_prefix or not heading_path:
            return ""
        kept = heading_path[-self.prefix_levels :] if self.prefix_levels else heading_path
        path = self.counter.truncate(HEADING_SEPARATOR.join(kept), self.chunk_size // 2)
        return f"{path}\n\n" if path else ""
