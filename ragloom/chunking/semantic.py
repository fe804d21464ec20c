"""Semantic chunking: cut between sentences whose embeddings are far apart, never past a hard size."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from ragloom.chunking.base import (
    BLANK_LINE,
    DEFAULT_CHUNK_SIZE,
    Chunker,
    Span,
    cut_after,
    register_chunker,
    rows_as_units,
)
from ragloom.chunking.tokens import TokenCounter
from ragloom.embedding.base import Embedder
from ragloom.errors import ChunkingError
from ragloom.types import Chunk, Document

DEFAULT_BREAKPOINT_PERCENTILE = 90.0
DEFAULT_MIN_CHUNK_TOKENS = 24

# Sentence ends: ./!/? (optionally closed by a quote or bracket) before whitespace; blank lines; and line
# starts that open a block in Markdown (heading, list item, "(a)" clause). Rules and tables keep their lines.
_BLOCK = (BLANK_LINE
          + r"|\n(?=[ \t]{0,3}(?:#{1,6}[ \t]|[-*+][ \t]|\d{1,3}[.)][ \t]|\([a-zA-Z0-9]{1,4}\)[ \t]))")
_BOUNDARY = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"'”’)\]])\s+|" + _BLOCK)
_PARAGRAPH = re.compile(_BLOCK)  # block boundaries only: paragraphs, headings, list items, clauses
UNITS = ("sentence", "paragraph")


@register_chunker("semantic")
class SemanticChunker(Chunker):
    """Greg Kamradt's method: embed each sentence (with ``buffer`` neighbours on each side), take the cosine
    distance between consecutive sentences, and cut where it reaches the document's ``breakpoint_percentile``.

    Bounds: a chunk never exceeds ``chunk_size`` tokens (it is cut before the sentence that would overflow), and
    a chunk under ``min_chunk_tokens`` is not cut on distance alone (no heading-only chunks). No overlap; the
    chunks cover the text.

    Defaults, measured with all-MiniLM-L6-v2: ``buffer=0``, because on pairs of SciFact abstracts joined by a
    space the join was the largest distance in 9 of 15 pairs with single sentences and in 2 of 15 with
    Kamradt's 3-sentence windows (neighbouring windows share two sentences, which flattens the peak);
    ``breakpoint_percentile=90`` rather than the usual 95, because with a 200-token cap 95 leaves most cuts to
    the size limit (three ObliQA rulebooks: 12 distance cuts and 40 size cuts at 95, 25 and 29 at 90).
    """

    needs_embedder = True

    def __init__(self, embedder: Embedder | None = None, *, chunk_size: int = DEFAULT_CHUNK_SIZE,
                 breakpoint_percentile: float = DEFAULT_BREAKPOINT_PERCENTILE, buffer: int = 0,
                 min_chunk_tokens: int | None = None, units: str = "sentence",
                 counter: TokenCounter | None = None) -> None:
        if embedder is None:
            raise ChunkingError("semantic: needs an embedder (get_chunker('semantic', embedder=...))")
        super().__init__(chunk_size=chunk_size, counter=counter)
        if min_chunk_tokens is None:
            min_chunk_tokens = min(DEFAULT_MIN_CHUNK_TOKENS, chunk_size // 4)
        if not 0.0 < breakpoint_percentile < 100.0 or buffer < 0 or not 0 <= min_chunk_tokens < chunk_size:
            raise ChunkingError("semantic: need 0 < breakpoint_percentile < 100, buffer >= 0 and "
                                "0 <= min_chunk_tokens < chunk_size")
        if units not in UNITS:
            raise ChunkingError(f"semantic: units={units!r}; one of {', '.join(UNITS)}")
        self.units = units
        self.embedder = embedder
        self.breakpoint_percentile = breakpoint_percentile
        self.buffer = buffer
        self.min_chunk_tokens = min_chunk_tokens
        self._prepared: dict[str, tuple[list[tuple[int, int]], np.ndarray]] = {}

    def params(self) -> dict[str, Any]:
        return {**super().params(), "embedder": self.embedder.model_id, "percentile": self.breakpoint_percentile,
                "buffer": self.buffer, "min_chunk_tokens": self.min_chunk_tokens, "units": self.units}

    def chunk_many(self, documents: Iterable[Document]) -> list[Chunk]:
        """One embedding call for the sentences of all documents: short documents batch well together."""
        documents = list(documents)
        units = [self.sentences(d) for d in documents]
        windows = [w for d, u in zip(documents, units, strict=True) for w in self._windows(d, u)]
        vectors = self.embedder.encode(windows) if windows else np.zeros((0, 1), dtype=np.float32)
        offset = 0
        for document, doc_units in zip(documents, units, strict=True):
            self._prepared[document.document_id] = (doc_units, vectors[offset : offset + len(doc_units)])
            offset += len(doc_units)
        try:
            return super().chunk_many(documents)
        finally:
            self._prepared.clear()

    def split(self, document: Document) -> list[Span]:
        prepared = self._prepared.get(document.document_id)
        if prepared is None:
            units = self.sentences(document)
            prepared = (units, self.embedder.encode(self._windows(document, units)) if units else None)
        units, vectors = prepared
        if not units:
            return []
        tokens = [n - self.counter.special_tokens for n in
                  self.counter.count_many([document.text[a:b] for a, b in units])]
        distances = 1.0 - np.sum(vectors[:-1] * vectors[1:], axis=1) if len(units) > 1 else np.zeros(0)
        threshold = float(np.percentile(distances, self.breakpoint_percentile)) if len(distances) else 0.0
        # ">=" so tied top distances still cut; a flat distribution (threshold at its minimum) cuts nowhere
        cut_on_distance = len(distances) > 0 and threshold > float(distances.min())

        budget = self.chunk_size - self.counter.special_tokens
        spans: list[Span] = []
        group_start, group_tokens = 0, tokens[0]
        for i in range(1, len(units)):
            # Sentences meet at whitespace, which WordPiece never spans, so token counts add up exactly.
            overflow = group_tokens + tokens[i] > budget
            topic_shift = (cut_on_distance and distances[i - 1] >= threshold
                           and group_tokens >= self.min_chunk_tokens)
            if overflow or topic_shift:
                spans.append(Span(units[group_start][0], units[i - 1][1]))
                group_start, group_tokens = i, 0
            group_tokens += tokens[i]
        spans.append(Span(units[group_start][0], units[-1][1]))
        # A sentence the size splitter cut inside a word breaks the additivity above: recheck, re-cut if needed.
        counts = self.counter.count_many([document.text[s.start : s.end] for s in spans])
        return [piece for span, n in zip(spans, counts, strict=True) for piece in (
            [span] if n <= self.chunk_size
            else [Span(a, b) for a, b in self.split_range(document, span.start, span.end, self.chunk_size)])]

    def sentences(self, document: Document) -> list[tuple[int, int]]:
        """The units compared (spans covering the text): sentences; with ``units="paragraph"`` paragraphs (and
        headings, list items, clauses), sentences only inside a paragraph longer than chunk_size. A sentence
        longer than chunk_size is cut by the size splitter. Each row of a pipe table is a unit (a cell's full stop
        is no sentence end), so chunks never end inside a row."""
        patterns = (_PARAGRAPH, _BOUNDARY) if self.units == "paragraph" else (_BOUNDARY,)
        return rows_as_units(document.text, self._units_in(document, 0, len(document.text), patterns))

    def _units_in(self, document: Document, start: int, end: int,
                  patterns: tuple[re.Pattern[str], ...]) -> list[tuple[int, int]]:
        """``document.text[start:end]`` cut at ``patterns[0]``; a piece longer than chunk_size is cut by the next
        pattern, and by the size splitter when none is left."""
        if not patterns:
            return self.split_range(document, start, end, self.chunk_size)
        return [u for (a, b), n in self._pieces(document, start, end, patterns[0])
                for u in ([(a, b)] if n <= self.chunk_size else self._units_in(document, a, b, patterns[1:]))]

    def _pieces(self, document: Document, start: int, end: int,
                pattern: re.Pattern[str]) -> list[tuple[tuple[int, int], int]]:
        """``document.text[start:end]`` cut after every match of ``pattern``, trimmed, with token counts."""
        spans = cut_after(document.text, start, end, pattern)
        return list(zip(spans, self.counter.count_many([document.text[a:b] for a, b in spans]), strict=True))

    def _windows(self, document: Document, units: list[tuple[int, int]]) -> list[str]:
        """Each sentence with its neighbours: single sentences are too short for stable distances."""
        text, k = document.text, self.buffer
        return [text[units[max(0, i - k)][0] : units[min(len(units) - 1, i + k)][1]] for i in range(len(units))]
