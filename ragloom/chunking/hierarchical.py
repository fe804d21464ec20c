"""Hierarchical chunking: document -> sections -> parents -> children, nested and linked by parent id."""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ragloom.chunking.base import Chunker, HeadingIndex, Span, register_chunker, trim
from ragloom.chunking.tokens import TokenCounter
from ragloom.errors import ChunkingError
from ragloom.types import Document

DEFAULT_CHILD_SIZE = 256
DEFAULT_PARENT_SIZES = (1024,)


@register_chunker("hierarchical")
class HierarchicalChunker(Chunker):
    """Levels, coarsest first (``Chunk.level`` 0): the whole document, its sections, one level per entry of
    ``parent_sizes`` and the children of ``chunk_size`` tokens. Each level partitions its parent (no overlap
    inside a level; levels overlap by design). Every document gets every level, so level numbers mean the
    same thing across a corpus: a short document's section or parent may repeat the span above it.

    Levels above the children may be longer than the model reads: they are stored whole (for context and
    auto-merge) and their ``embed_text`` is the longest prefix that fits the model, flagged
    ``metadata["embed_truncated"] = True``. Children always fit.

    Sections are the headings of the shallowest level that occurs at least twice (a rulebook's "## 1 ...",
    "## 2 ..." under one "# Title"); a document without such headings is one section.
    """

    def __init__(self, *, chunk_size: int = DEFAULT_CHILD_SIZE, parent_sizes: Sequence[int] = DEFAULT_PARENT_SIZES,
                 document_level: bool = True, section_level: bool = True, counter: TokenCounter | None = None) -> None:
        super().__init__(chunk_size=chunk_size, counter=counter)
        sizes = [*parent_sizes, chunk_size]
        if any(a <= b for a, b in zip(sizes, sizes[1:], strict=False)):
            raise ChunkingError(f"hierarchical: parent_sizes {list(parent_sizes)} must decrease and exceed "
                                f"chunk_size={chunk_size}")
        self.parent_sizes = tuple(parent_sizes)
        self.document_level = document_level
        self.section_level = section_level

    def params(self) -> dict[str, Any]:
        return {**super().params(), "parent_sizes": list(self.parent_sizes), "document_level": self.document_level,
                "section_level": self.section_level}

    @property
    def level_names(self) -> list[str]:
        return _level_names(self.document_level, self.section_level, self.parent_sizes)

    @classmethod
    def default_levels(cls) -> tuple[str, ...]:
        """The level names of the chunks this chunker makes with its default parameters (as the pipeline runs
        it), coarsest first; ``Chunk.level`` indexes them."""
        defaults = {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()}
        return tuple(_level_names(defaults["document_level"], defaults["section_level"], defaults["parent_sizes"]))

    def split(self, document: Document) -> list[Span]:
        start, end = trim(document.text, 0, len(document.text))
        spans: list[Span] = []
        level = 0
        frontier: list[tuple[int, int, int | None]] = [(start, end, None)]  # (start, end, index of parent span)
        if self.document_level:
            spans.append(Span(start, end, level=0, truncate_embed=True))
            frontier = [(start, end, 0)]
            level = 1
        if self.section_level:
            sections = _sections(document)
            frontier = self._descend(spans, frontier, level, lambda a, b: [s for s in sections if a <= s[0] < b])
            level += 1
        for size in self.parent_sizes:
            frontier = self._descend(spans, frontier, level,
                                     lambda a, b, size=size: self.split_range(document, a, b, size))
            level += 1
        self._descend(spans, frontier, level, lambda a, b: self.split_range(document, a, b, self.chunk_size),
                      truncate=False)
        return spans

    @staticmethod
    def _descend(spans: list[Span], frontier: list[tuple[int, int, int | None]], level: int, cut: Any,
                 truncate: bool = True) -> list[tuple[int, int, int | None]]:
        below = []
        for start, end, parent in frontier:
            for a, b in cut(start, end):
                below.append((a, b, len(spans)))
                spans.append(Span(a, b, level=level, parent=parent, truncate_embed=truncate))
        return below


def _level_names(document_level: bool, section_level: bool, parent_sizes: Sequence[int]) -> list[str]:
    names = (["document"] if document_level else []) + (["section"] if section_level else [])
    return names + [f"parent_{size}" for size in parent_sizes] + ["child"]


def _sections(document: Document) -> list[tuple[int, int]]:
    index = HeadingIndex(document)
    counts = Counter(h.level for h in document.headings)
    repeated = [level for level, n in counts.items() if n >= 2]
    if not repeated:
        return [trim(document.text, 0, len(document.text))]
    return index.sections(max_level=min(repeated))
