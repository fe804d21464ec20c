"""The one chunker interface, the registry, and everything strategies share (ids, positions, heading paths)."""

from __future__ import annotations

import bisect
import functools
import inspect
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from semantic_text_splitter import MarkdownSplitter, TextSplitter

from ragloom.chunking.tokens import TokenCounter, get_token_counter
from ragloom.errors import ChunkingError, ConfigError
from ragloom.parsing.markdown import MARKDOWN_FORMATS, TableSpan, find_tables
from ragloom.registry import Registry
from ragloom.types import Chunk, Document, make_chunk_id, sha256_hex

if TYPE_CHECKING:
    from ragloom.settings import Settings

DEFAULT_CHUNK_SIZE = 200  # tokens incl. [CLS]/[SEP]; all-MiniLM-L6-v2 reads 256
DEFAULT_OVERLAP = 30


@dataclass(frozen=True)
class Span:
    """A piece a strategy chose; the base turns it into a Chunk."""

    start: int
    end: int
    level: int = 0
    parent: int | None = None  # index of the parent span in the list split() returned
    embed_prefix: str = ""  # text put before the chunk text in embed_text (headered's heading path)
    truncate_embed: bool = False  # longer than the model reads: embed_text is its longest prefix that fits


class HeadingIndex:
    """Heading paths of a document's spans. A span's path is the chain of headings whose sections hold all of its
    content, heading lines at its edges aside: a chunk opening with `## 2 Part` then `### 2.1 Topic` and staying
    in 2.1 sits under "2.1 Topic"; one that runs from 2.1 into 2.2 sits under "2 Part"."""

    def __init__(self, document: Document) -> None:
        self._document = document
        text = document.text
        self._line_starts = [h.start for h in document.headings]
        self._line_ends = []
        for h in document.headings:
            newline = text.find("\n", h.start)
            self._line_ends.append(len(text) if newline < 0 else newline)

    def path_at(self, offset: int) -> list[str]:
        return [h.title for h in self._document.headings if h.start <= offset < h.end]

    def _heading_line_at(self, pos: int) -> int:
        """Index of the heading whose line holds ``pos``, or -1."""
        i = bisect.bisect_right(self._line_starts, pos) - 1
        return i if i >= 0 and self._line_starts[i] <= pos < self._line_ends[i] else -1

    def content_start(self, start: int, end: int) -> int | None:
        """Where the first non-heading, non-blank line of the span starts; None when it has none."""
        text = self._document.text
        pos = start
        while True:
            while pos < end and text[pos].isspace():
                pos += 1
            if pos >= end:
                return None
            i = self._heading_line_at(pos)
            if i < 0:
                return pos
            pos = self._line_ends[i]

    def content_end(self, start: int, end: int) -> int:
        """Just past the last non-heading, non-blank character of the span (call after content_start)."""
        text = self._document.text
        pos = end
        while pos > start:
            while pos > start and text[pos - 1].isspace():
                pos -= 1
            i = self._heading_line_at(pos - 1)
            if i < 0:
                return pos
            pos = self._line_starts[i]
        return pos

    def path_for(self, start: int, end: int) -> list[str]:
        first = self.content_start(start, end)
        if first is None:
            return self.path_at(start)  # only heading lines: where it starts
        last = self.content_end(start, end)
        return [h.title for h in self._document.headings if h.start <= first and last <= h.end]

    def sections(self, max_level: int = 6) -> list[tuple[int, int]]:
        """The document cut at every heading of level <= max_level, trimmed; a part that is only heading lines
        (a title right above a subheading) joins the part after it, so no section is a bare heading."""
        text = self._document.text
        cuts = sorted({0, *(h.start for h in self._document.headings if h.level <= max_level), len(text)})
        parts = [trim(text, a, b) for a, b in zip(cuts, cuts[1:], strict=False)]
        parts = [(a, b) for a, b in parts if a < b]
        merged: list[tuple[int, int]] = []
        pending: int | None = None
        for i, (a, b) in enumerate(parts):
            if self.content_start(a, b) is None and i < len(parts) - 1:
                pending = a if pending is None else pending
                continue
            merged.append((a if pending is None else pending, b))
            pending = None
        return merged


BLANK_LINE = r"\n[ \t]*\n\s*"  # a paragraph break (regex source)


def cut_after(text: str, start: int, end: int, pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    """``text[start:end]`` cut after every match of ``pattern``: the pieces trimmed, blank ones dropped."""
    cuts = [start, *(m.end() for m in pattern.finditer(text, start, end)), end]
    return [(a, b) for a, b in (trim(text, a, b) for a, b in zip(cuts, cuts[1:], strict=False)) if a < b]


def trim(text: str, start: int, end: int) -> tuple[int, int]:
    """The span without leading and trailing whitespace (start == end when it is blank)."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


class Chunker(ABC):
    """Subclasses implement ``split(document) -> list[Span]``; ``chunk`` and ``chunk_many`` do the rest."""

    name: ClassVar[str] = ""
    needs_embedder: ClassVar[bool] = False  # True: constructed with embedder=... (see chunker_for)

    @classmethod
    def default_levels(cls) -> tuple[str, ...]:
        """Names of the nested levels (``Chunk.level`` 0, 1, ...) of this chunker's chunks with its default
        parameters; () for a chunker whose chunks are all one level."""
        return ()

    def __init__(self, *, chunk_size: int = DEFAULT_CHUNK_SIZE, counter: TokenCounter | None = None) -> None:
        self.counter = counter or get_token_counter()
        if not 8 <= chunk_size <= self.counter.max_tokens:
            raise ChunkingError(f"{self.name}: chunk_size={chunk_size} must be between 8 and the model's input "
                                f"limit {self.counter.max_tokens} (tokens, incl. special tokens)")
        self.chunk_size = chunk_size

    # what a subclass provides ----------------------------------------------------------------------
    @abstractmethod
    def split(self, document: Document) -> list[Span]:
        """The spans of ``document``: trimmed, non-empty, offsets into ``document.text``."""

    def params(self) -> dict[str, Any]:
        """Every setting that changes the chunks; extend in subclasses."""
        return {"chunk_size": self.chunk_size}

    # what the base does once for all ---------------------------------------------------------------
    @functools.cached_property
    def params_key(self) -> str:
        """Fingerprint of strategy, settings and tokenizer: part of every chunk id."""
        payload = {"strategy": self.name, "tokenizer": self.counter.fingerprint, **self.params()}
        return sha256_hex(json.dumps(payload, sort_keys=True, default=str))[:16]

    def chunk(self, document: Document) -> list[Chunk]:
        if not document.text.strip():
            return []
        spans = self.split(document)
        text = document.text
        headings = HeadingIndex(document)
        texts = [text[s.start : s.end] for s in spans]
        counts = self.counter.count_many(texts)
        order = sorted(range(len(spans)), key=lambda i: (spans[i].level, spans[i].start, spans[i].end))
        position_in_level: dict[int, int] = {}
        ids: list[str] = [""] * len(spans)
        chunks: dict[int, Chunk] = {}
        for i in order:
            span, chunk_text = spans[i], texts[i]
            if not (0 <= span.start < span.end <= len(text)) or not chunk_text.strip():
                raise ChunkingError(f"{self.name}: bad span {span} in {document.document_id!r}")
            metadata = {**document.metadata, "title": document.title, "source_path": document.source_path}
            if document.page_starts:
                metadata["page"] = bisect.bisect_right(document.page_starts, span.start)
            embed_text = span.embed_prefix + chunk_text
            # A piece of a split table embeds its columns too, where the model reads them all (a level embedded
            # truncated keeps its plain prefix)
            header = table_header_for(text, span.start)
            if header and self.counter.count(span.embed_prefix + header + chunk_text) <= self.counter.max_tokens:
                embed_text = span.embed_prefix + header + chunk_text
            embed_count = counts[i] if embed_text == chunk_text else self.counter.count(embed_text)
            if span.truncate_embed:
                if embed_count > self.counter.max_tokens:
                    embed_text = self.counter.truncate(embed_text, self.counter.max_tokens)
                    metadata["embed_truncated"] = True
            elif counts[i] > self.chunk_size or embed_count > self.counter.max_tokens:
                raise ChunkingError(f"{self.name}: a chunk of {document.document_id!r} has {counts[i]} tokens "
                                    f"({embed_count} embedded), over chunk_size={self.chunk_size} or the model's "
                                    f"input limit {self.counter.max_tokens}")
            position = position_in_level.get(span.level, 0)
            position_in_level[span.level] = position + 1
            ids[i] = make_chunk_id(document.document_id, self.name, f"{self.params_key}:{span.level}",
                                   span.start, span.end, chunk_text)
            chunks[i] = Chunk(
                chunk_id=ids[i], document_id=document.document_id, strategy=self.name, text=chunk_text,
                start=span.start, end=span.end, token_count=counts[i], position=position, level=span.level,
                heading_path=headings.path_for(span.start, span.end), embed_text=embed_text,
                metadata=metadata, scope=document.scope,
            )
        for i, span in enumerate(spans):
            if span.parent is not None:
                chunks[i].parent_id = ids[span.parent]
        if len(set(ids)) != len(ids):
            raise ChunkingError(f"{self.name}: duplicate spans in {document.document_id!r}")
        return [chunks[i] for i in order]

    def chunk_many(self, documents: Iterable[Document]) -> list[Chunk]:
        return [c for document in documents for c in self.chunk(document)]

    # helpers for strategies ------------------------------------------------------------------------
    def split_range(self, document: Document, start: int, end: int, max_tokens: int,
                    overlap: int = 0) -> list[tuple[int, int]]:
        """Trimmed pieces of ``document.text[start:end]`` of at most ``max_tokens`` tokens each (incl. special
        tokens), cut at the coarsest boundary that fits: headings, paragraphs, sentences, words, characters.

        semantic-text-splitter does the cutting; its ``chunk_indices`` offsets are character offsets
        (checked in the tests on non-ASCII text), so they index Python strings directly.

        A pipe table is never cut inside a row: where the splitter would, the range is cut around each table and
        the table packed row by row (no overlap), leaving room beside later pieces for the header row that
        ``chunk`` puts in front of their embedded text. Only a single row longer than ``max_tokens`` is cut inside.
        """
        pieces = self._split_text(document, start, end, max_tokens, overlap)
        tables = [t for t in tables_of(document.text) if t.start < end and start < t.end]
        if not tables or not (_cuts_a_row(pieces, tables) or self._no_room_for_header(document.text, pieces)):
            return pieces
        out: list[tuple[int, int]] = []
        cursor = start
        for table in tables:
            a, b = trim(document.text, cursor, max(cursor, table.start))
            if a < b:
                out.extend(self._split_text(document, a, b, max_tokens, overlap))
            out.extend(self._pack_rows(document, table, max(start, table.start), min(end, table.end), max_tokens))
            cursor = min(end, table.end)
        a, b = trim(document.text, cursor, end)
        if a < b:
            out.extend(self._split_text(document, a, b, max_tokens, overlap))
        return self._join_lone_headings(document, out, max_tokens)

    def _no_room_for_header(self, text: str, pieces: list[tuple[int, int]]) -> bool:
        """Whether a piece starting inside a table's body leaves the model no room for the header row."""
        for a, b in pieces:
            header = table_header_for(text, a)
            if header and self.counter.count(header + text[a:b]) > self.counter.max_tokens:
                return True
        return False

    def _pack_rows(self, document: Document, table: TableSpan, start: int, end: int,
                   max_tokens: int) -> list[tuple[int, int]]:
        """The rows of ``table`` within ``[start, end)`` packed into pieces of at most ``max_tokens``; a piece after
        the first keeps room for the header row in its embedded text."""
        text = document.text
        rows = [(max(a, start), min(b, end)) for a, b in table.rows if a < end and start < b]
        rows = [(a, b) for a, b in (trim(text, a, b) for a, b in rows) if a < b]
        special = self.counter.special_tokens
        header = self.counter.count(text[table.start : table.header_end]) - special
        # rows meet at a newline, which WordPiece never spans, so their counts add up (checked below)
        counts = [n - special for n in self.counter.count_many([text[a:b] for a, b in rows])]
        full = max_tokens - special
        room_after_header = min(full, self.counter.max_tokens - special - (header if header < full // 2 else 0))
        pieces: list[tuple[int, int]] = []
        size = 0
        for (a, b), n in zip(rows, counts, strict=True):
            room = full if pieces and pieces[-1][0] < table.header_end else room_after_header
            if pieces and size + n <= room:
                pieces[-1] = (pieces[-1][0], b)
                size += n
            else:
                pieces.append((a, b))
                size = n
        out: list[tuple[int, int]] = []
        for a, b in pieces:
            if self.counter.count(text[a:b]) <= max_tokens:
                out.append((a, b))
            else:  # one row longer than a chunk: the only cut made inside a row
                out.extend(self._split_text(document, a, b, max_tokens, 0))
        return out

    def _split_text(self, document: Document, start: int, end: int, max_tokens: int,
                    overlap: int = 0) -> list[tuple[int, int]]:
        """``split_range`` without its care for tables: the splitter's pieces."""
        capacity = max_tokens - self.counter.special_tokens
        if capacity <= overlap:
            raise ChunkingError(f"{self.name}: {max_tokens} tokens leaves no room next to overlap={overlap}")
        markdown = document.format in MARKDOWN_FORMATS or bool(document.headings)
        splitter = _splitter(self.counter, markdown, capacity, overlap)
        text = document.text
        # MarkdownSplitter keeps leading indentation even with trim=True; chunks here never start with blanks
        pieces = [trim(text, start + offset, start + offset + len(piece))
                  for offset, piece in splitter.chunk_indices(text[start:end]) if piece.strip()]
        return self._join_lone_headings(document, pieces, max_tokens)

    def _join_lone_headings(self, document: Document, pieces: list[tuple[int, int]],
                            max_tokens: int) -> list[tuple[int, int]]:
        """The splitter may leave a heading alone at the end of a full chunk (and a table cut out of its section
        may follow its heading directly); a heading belongs with what follows."""
        if not document.headings:
            return pieces
        text = document.text
        merged: list[tuple[int, int]] = []
        i = 0
        while i < len(pieces):
            a, b = pieces[i]
            if (i + 1 < len(pieces) and _HEADING_ONLY.match(text, a, b)
                    and self.counter.count(text[a : pieces[i + 1][1]]) <= max_tokens):
                pieces[i + 1] = (a, pieces[i + 1][1])
            else:
                merged.append((a, b))
            i += 1
        return merged


_HEADING_ONLY = re.compile(r"(?:[ \t]{0,3}#{1,6}[ \t][^\n]*(?:\n\s*|\Z))+\Z")


@functools.lru_cache(maxsize=64)
def tables_of(text: str) -> tuple[TableSpan, ...]:
    """The pipe tables of a document's text (cached: the strategies ask once per piece)."""
    return tuple(find_tables(text))


def _row_containing(tables: Iterable[TableSpan], offset: int) -> tuple[int, int] | None:
    """The table row (line) that ``offset`` falls strictly inside, if any."""
    for table in tables:
        if table.start < offset < table.end:
            i = bisect.bisect_right([a for a, _ in table.rows], offset) - 1
            if i >= 0 and table.rows[i][0] < offset < table.rows[i][1]:
                return table.rows[i]
    return None


def _cuts_a_row(pieces: list[tuple[int, int]], tables: list[TableSpan]) -> bool:
    return any(_row_containing(tables, edge) is not None for a, b in pieces for edge in (a, b))


def table_header_for(text: str, start: int) -> str:
    """The header row (and delimiter line) of the table whose body holds ``start``; '' when it is not in a table
    body. What a piece of a split table carries in front of its embedded text, so its rows keep their columns."""
    for table in tables_of(text):
        if table.header_end < start < table.end:
            return text[table.start : table.header_end] + "\n"
        if table.start > start:
            break
    return ""


def rows_as_units(text: str, units: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Units (trimmed spans in order) re-cut so that each table row is a unit of its own (the first with the header
    row above it) and no unit boundary falls inside a row: units touching one table are joined first, then cut at
    its row boundaries."""
    tables = tables_of(text)
    if not tables:
        return units
    joined: list[tuple[int, int]] = []
    for a, b in units:
        if joined and any(t.start < a and joined[-1][1] < t.end for t in tables):  # they meet inside a table
            joined[-1] = (joined[-1][0], b)
        else:
            joined.append((a, b))
    # the header row and delimiter line stay with the first body row: a header alone says nothing
    edges = {edge for t in tables for row in (t.rows[:1] + t.rows[3:] if len(t.rows) > 2 else t.rows)
             for edge in row} | {t.rows[2][1] for t in tables if len(t.rows) > 2}
    out: list[tuple[int, int]] = []
    for a, b in joined:
        cuts = sorted({a, b, *(edge for edge in edges if a < edge < b)})
        out.extend((x, y) for x, y in (trim(text, x, y) for x, y in zip(cuts, cuts[1:], strict=False)) if x < y)
    return out


@functools.lru_cache(maxsize=256)
def _splitter(counter: TokenCounter, markdown: bool, capacity: int, overlap: int) -> Any:
    # building one costs ~35 ms (the tokenizer is serialized into Rust): share them across chunkers
    kind = MarkdownSplitter if markdown else TextSplitter
    return kind.from_huggingface_tokenizer(counter.tokenizer, capacity, overlap=overlap, trim=True)


# registry ----------------------------------------------------------------------------------------------

_REGISTRY: Registry[type[Chunker]] = Registry("chunker", Chunker, ChunkingError)
C = TypeVar("C", bound=type[Chunker])


def register_chunker(name: str) -> Callable[[C], C]:
    """Class decorator: makes a chunker available to ``get_chunker(name)``; a name can be taken once."""
    return _REGISTRY.register(name)


def get_chunker(name: str, **params: Any) -> Chunker:
    cls = _REGISTRY.get(name)
    if cls is None:
        raise ChunkingError(f"unknown chunking {name!r}; registered: {', '.join(available_chunkers())}")
    try:
        return cls(**params)
    except TypeError as e:
        raise ChunkingError(f"bad parameters for chunker {name!r}: {e}") from e


def chunk_levels(name: str) -> tuple[str, ...]:
    """The level names of chunking ``name`` (``Chunker.default_levels`` of its registered chunker), coarsest
    first; () for a one-level or unregistered chunking."""
    cls = _REGISTRY.get(name)
    return cls.default_levels() if cls is not None else ()


def chunker_option_names(name: str) -> tuple[str, ...]:
    """The keyword options of chunking ``name``'s registered chunker (what RAGLOOM_CHUNKER_OPTIONS may set)."""
    cls = _REGISTRY.get(name)
    if cls is None:
        return ()
    skip = {"self", "counter", "embedder"}
    return tuple(p.name for p in inspect.signature(cls.__init__).parameters.values()
                 if p.name not in skip and p.kind is inspect.Parameter.KEYWORD_ONLY)


def available_chunkers() -> list[str]:
    return _REGISTRY.names()


def chunker_for(name: str, embedder: Any = None, **params: Any) -> Chunker:
    """The registered chunker ``name``, handed the embedder only when it needs one (``Chunker.needs_embedder``);
    ``embedder`` may be a loader, called only then (so chunkers that only count tokens never load the model)."""
    cls = _REGISTRY.get(name)
    if cls is not None and cls.needs_embedder:
        params["embedder"] = embedder() if callable(embedder) and not hasattr(embedder, "encode") else embedder
    return get_chunker(name, **params)


def check_chunking_settings(settings: Settings) -> None:
    """The settings' chunking names and chunker options against the registry (with any chunker registered
    before): called where chunks are made, so a typo fails before anything is read."""
    known = available_chunkers()
    unknown = [n for n in (*settings.chunkings, *settings.graph_chunkings, *settings.summary_chunkings)
               if n not in known]
    if unknown:
        raise ConfigError(f"RAGLOOM_CHUNKINGS / RAGLOOM_GRAPH_CHUNKINGS: unknown chunking {unknown}; "
                          f"registered: {', '.join(known)}")
    for chunking, chosen in settings.chunker_options_by_name().items():
        if chunking not in known:
            raise ConfigError(f"RAGLOOM_CHUNKER_OPTIONS: unknown chunking {chunking!r}; registered: {', '.join(known)}")
        unknown = sorted(set(chosen) - set(chunker_option_names(chunking)))
        if unknown:
            raise ConfigError(f"RAGLOOM_CHUNKER_OPTIONS: {chunking} has no option {unknown}; its options: "
                              f"{', '.join(chunker_option_names(chunking))}")

