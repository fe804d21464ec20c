"""Headered chunking: one chunk per Markdown/HTML heading section, sub-split when a section is too long."""

from __future__ import annotations

import re
from typing import Any

from ragloom.chunking.base import (
    BLANK_LINE,
    DEFAULT_CHUNK_SIZE,
    Chunker,
    HeadingIndex,
    Span,
    cut_after,
    register_chunker,
)
from ragloom.chunking.tokens import TokenCounter
from ragloom.errors import ChunkingError
from ragloom.types import HEADING_SEPARATOR, Document

UNITS = ("section", "paragraph")
DEFAULT_MIN_TOKENS = 64  # paragraph units: best of 0 / 32 / 40 / 48 / 64 / 80 / 100 on ObliQA dev (README)
_BLANK_LINE = re.compile(BLANK_LINE)
# A paragraph that continues the one before it: a list item (bullet, "a)", "(a)", "b.", "(iv)", "(1)") ...
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+•][ \t]|\(?(?:[a-zA-Z]|[ivxlcIVXLC]{1,5})[.)][ \t]|\(\d{1,3}\)[ \t])")
# ... or any paragraph after one that announces it (ends with ":" or a dash)
_LEAD_IN = re.compile(r"[:\-–—]\s*$")
# A paragraph that opens a unit of its own: numbered ("4.4", "12)", "(3)", "APP 1.5") or a heading
_OPENS = re.compile(r"[ \t]*(?:\(?\d|[A-Z]{2,}[ \t]+\d|#)")


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
    lane reads the title and heading path of every chunk anyway.

    ``units``: ``paragraph`` (the default) makes each blank-line paragraph of a section its own chunk, so chunks
    end where the document's own units (rules, clauses, paragraphs) end and a reader's token budget is not spent
    on the neighbouring one: a list stays with the paragraph that introduces it, and a paragraph under
    ``min_tokens`` joins a neighbour (the one before it when it does not open a numbered unit or a heading).
    ``chunk_size`` only caps a long paragraph there (256, the model's whole input, scored higher on ObliQA but
    lower on SciFact's unstructured abstracts, so the default stays 200). ``section`` packs a long section's text
    into pieces of up to ``chunk_size``, cut at the coarsest boundary that fits, like recursive."""

    def __init__(self, *, chunk_size: int = DEFAULT_CHUNK_SIZE, heading_prefix: bool = False, overlap: int = 0,
                 prefix_levels: int = 0, units: str = "paragraph", min_tokens: int | None = None,
                 counter: TokenCounter | None = None) -> None:
        super().__init__(chunk_size=chunk_size, counter=counter)
        if not 0 <= overlap < chunk_size // 2:
            raise ChunkingError(f"headered: overlap={overlap} must be >= 0 and below half of chunk_size={chunk_size}")
        self.heading_prefix = heading_prefix
        self.overlap = overlap
        if prefix_levels < 0:
            raise ChunkingError(f"headered: prefix_levels={prefix_levels} must be >= 0 (0: the whole path)")
        self.prefix_levels = prefix_levels
        if units not in UNITS:
            raise ChunkingError(f"headered: units={units!r}; one of {', '.join(UNITS)}")
        if min_tokens is None:
            min_tokens = min(DEFAULT_MIN_TOKENS, chunk_size // 2)
        if not 0 <= min_tokens <= chunk_size:
            raise ChunkingError(f"headered: min_tokens={min_tokens} must be between 0 and chunk_size={chunk_size}")
        self.units = units
        self.min_tokens = min_tokens

    def params(self) -> dict[str, Any]:
        return {**super().params(), "heading_prefix": self.heading_prefix, "overlap": self.overlap,
                "prefix_levels": self.prefix_levels, "units": self.units,
                **({"min_tokens": self.min_tokens} if self.units == "paragraph" else {})}

    def split(self, document: Document) -> list[Span]:
        index = HeadingIndex(document)
        spans: list[Span] = []
        for start, end in index.sections():
            prefix = self.prefix(index.path_for(start, end))
            prefix_tokens = self.counter.count(prefix) - self.counter.special_tokens if prefix else 0
            budget = min(self.chunk_size, self.counter.max_tokens - prefix_tokens)
            if self.units == "paragraph":
                spans.extend(Span(a, b, embed_prefix=prefix)
                             for a, b in self._paragraphs(document, index, start, end, budget))
                continue
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

    def _paragraphs(self, document: Document, index: HeadingIndex, start: int, end: int,
                    budget: int) -> list[tuple[int, int]]:
        """``units="paragraph"``: the section's blank-line paragraphs, each its own piece (cut to ``budget`` when
        longer); the heading lines join the first. A piece takes in the next one while the two fit ``budget`` and
        the piece is under ``min_tokens``, or the next one is a list item or a short paragraph that opens nothing
        (a closing remark), or the piece ends with ":" (a lead-in)."""
        text = document.text
        body = index.content_start(start, end)
        if body is None:  # only heading lines (the document's last section)
            return [(start, end)] if self._fits(document, start, end, budget) else self.split_range(
                document, start, end, budget, self.overlap)
        blocks = cut_after(text, body, end, _BLANK_LINE)
        blocks[0] = (start, blocks[0][1])  # heading lines belong to the first paragraph
        pieces: list[tuple[int, int]] = []
        counts: list[int] = []  # tokens of each piece, without the special tokens
        special = self.counter.special_tokens
        for (a, b), n in zip(blocks, self.counter.count_many([text[a:b] for a, b in blocks]), strict=True):
            cut = [(a, b)] if n <= budget else self.split_range(document, a, b, budget, self.overlap)
            pieces.extend(cut)
            counts.extend([n - special] if n <= budget else
                          [m - special for m in self.counter.count_many([text[x:y] for x, y in cut])])
        room = budget - special
        merged: list[tuple[int, int]] = []
        size = 0
        for (a, b), n in zip(pieces, counts, strict=True):
            joins = merged and (size < self.min_tokens or _LIST_ITEM.match(text, a)
                                or _LEAD_IN.search(text, merged[-1][0], merged[-1][1])
                                or (n < self.min_tokens and not _OPENS.match(text, a)))
            # pieces meet at whitespace, which WordPiece never spans, so counts add up; _fits makes sure
            if joins and size + n <= room and self._fits(document, merged[-1][0], b, budget):
                merged[-1] = (merged[-1][0], b)
                size += n
            else:
                merged.append((a, b))
                size = n
        return merged

    def _fits(self, document: Document, start: int, end: int, budget: int) -> bool:
        return self.counter.count(document.text[start:end]) <= budget

    def prefix(self, heading_path: list[str]) -> str:
        if not self.heading_prefix or not heading_path:
            return ""
        kept = heading_path[-self.prefix_levels :] if self.prefix_levels else heading_path
        path = self.counter.truncate(HEADING_SEPARATOR.join(kept), self.chunk_size // 2)
        return f"{path}\n\n" if path else ""
