"""The records that flow through ragloom: files -> Document -> Chunk -> stores -> RetrievalResult."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from ragloom.errors import ScopeError

SHARED_SCOPE = "__shared__"
# not starting with '.': a scope names a folder of the uploads folder, and hidden folders are never scanned (an
# upload there would stay queued forever); '.' and '..' are refused by the same rule
SCOPE_PART = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}")
SCOPE_PART_RULE = "1-64 letters, digits, '_', '-' or '.', not starting with '.'"
HEADING_SEPARATOR = " > "  # between the titles of a heading path, wherever one is written as text
COOCCURS = "CO_OCCURS"  # the relation type of two entities named in one chunk

# Where long operations report progress: print, a Dagster logger's info, a list's append.
Log = Callable[[str], None]


def no_log(message: str) -> None:
    """The Log that drops every message."""


def sha256_hex(data: str | bytes) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Scope:
    """Where a document is visible: ``__shared__`` ⊃ tenant ⊃ user ⊃ chat (⊃ agent).

    An empty field ends the path: ``Scope("acme", "", "c1")`` is invalid, a chat needs a user.
    ``agent`` set means ``chat_agent`` (one agent in a chat); unset means ``chat_shared``.
    Each part is 1-64 ASCII letters, digits, ``_ - .``, not starting with ``.`` (scopes name folders and
    bound what a caller may read); anything else is a ScopeError.
    """

    tenant: str = ""
    user: str = ""
    chat: str = ""
    agent: str = ""

    def __post_init__(self) -> None:
        parts = [self.tenant, self.user, self.chat, self.agent]
        seen_gap = False
        for part in parts:
            if not isinstance(part, str):
                raise ScopeError(f"scope parts are text, got {type(part).__name__} {part!r:.70}")
            if not part:
                seen_gap = True
            elif seen_gap:
                raise ScopeError(f"scope {parts!r:.200} has a level set below an unset one")
            elif not SCOPE_PART.fullmatch(part) or part in (".", "..", SHARED_SCOPE):
                shown = repr(part) if len(part) <= 70 else f"{part[:64]!r}... ({len(part)} characters)"
                raise ScopeError(f"scope part {shown} is not allowed: use {SCOPE_PART_RULE}"
                                 + (f", and not {SHARED_SCOPE!r}" if part == SHARED_SCOPE else ""))

    @property
    def path(self) -> str:
        parts = [p for p in (self.tenant, self.user, self.chat, self.agent) if p]
        return "/".join(parts) if parts else SHARED_SCOPE

    def visible_paths(self) -> list[str]:
        """This scope and every ancestor: what a query in this scope may read."""
        parts = [p for p in (self.tenant, self.user, self.chat, self.agent) if p]
        return [SHARED_SCOPE] + ["/".join(parts[: i + 1]) for i in range(len(parts))]

    @classmethod
    def from_path(cls, path: str | None) -> Scope:
        """``tenant/user/chat[/agent]`` (a leading or trailing ``/`` is ignored); empty or ``__shared__``:
        the shared scope."""
        if path is not None and not isinstance(path, str):
            raise ScopeError(f"a scope path is text like 'tenant/user', got {type(path).__name__}")
        if not path or path == SHARED_SCOPE:
            return cls()
        parts = path.strip("/").split("/")
        if len(parts) > 4:
            raise ScopeError(f"scope path {path!r:.200} has more than 4 levels (tenant/user/chat/agent)")
        if "" in parts:
            raise ScopeError(f"scope path {path!r:.200} has an empty part: use {SCOPE_PART_RULE} for each")
        return cls(*parts)


@dataclass(frozen=True)
class Heading:
    """A heading and the span of the section it opens (up to the next heading of its level or above)."""

    level: int
    title: str
    start: int  # offset of the heading line in Document.text
    end: int  # end of the section


@dataclass
class Document:
    document_id: str
    title: str
    text: str
    source_path: str
    format: str  # markdown | text | html | pdf | jsonl | docx | pptx | xlsx | csv | email
    content_hash: str
    modified_at: float = 0.0  # unix seconds of the source file
    headings: list[Heading] = field(default_factory=list)
    page_starts: list[int] = field(default_factory=list)  # PDFs: text offset where page i+1 begins
    metadata: dict[str, Any] = field(default_factory=dict)
    scope: Scope = field(default_factory=Scope)


@dataclass(frozen=True)
class Rejection:
    """A source that could not become a document, and why. Nothing is dropped silently."""

    source_path: str
    reason: str  # short kind: empty, binary, undecodable, corrupt, encrypted, oversized, malformed, ...
    detail: str = ""


@dataclass
class Chunk:
    chunk_id: str
    document_id: str
    strategy: str
    text: str  # == document.text[start:end]
    start: int
    end: int
    token_count: int
    position: int  # reading order within (document, strategy, level)
    level: int = 0  # hierarchical: 0 = coarsest; others 0
    parent_id: str | None = None
    heading_path: list[str] = field(default_factory=list)
    embed_text: str = ""  # what is embedded (text, optionally prefixed by the heading path)
    metadata: dict[str, Any] = field(default_factory=dict)
    scope: Scope = field(default_factory=Scope)

    def __post_init__(self) -> None:
        if not self.embed_text:
            self.embed_text = self.text


def make_chunk_id(document_id: str, strategy: str, params_key: str, start: int, end: int, text: str) -> str:
    """Content-derived chunk id: the same document, settings and span always give the same id.

    The text hash is part of it so an edit that keeps a span's offsets still yields a new id.
    """
    return sha256_hex(f"{document_id}\x1f{strategy}\x1f{params_key}\x1f{start}\x1f{end}\x1f{sha256_hex(text)}")[:32]


@dataclass(frozen=True)
class Entity:
    entity_id: str
    name: str  # canonical surface form
    type: str  # spaCy label, e.g. ORG, PERSON, GPE
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Mention:
    chunk_id: str
    entity_id: str
    count: int
    labels: tuple[tuple[str, int], ...] = ()  # (NER label, spans) of its mentions in this chunk: type votes
    cues: tuple[tuple[str, int], ...] = ()  # (type cue rule, spans) of its mentions in this chunk (extraction.cues)


@dataclass(frozen=True)
class Relation:
    source_id: str
    target_id: str
    type: str  # COOCCURS or a verb lemma
    chunk_id: str  # evidence
    weight: int = 1


@dataclass
class RetrievedItem:
    chunk_id: str
    document_id: str
    text: str
    score: float  # fused score
    rank: int = 0
    heading_path: list[str] = field(default_factory=list)
    lane_scores: dict[str, float] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class ResultInfo:
    """What a retrieval did, typed: every strategy fills these (``Retriever.search``). ``details`` holds what one
    strategy or step records for itself (``rerank``, ``graph``, ``adaptive``, ``multi_hop``, ``transforms``,
    ``duplicates_removed``, ...), each documented where it is written. ``to_dict`` is the JSON the doors show."""

    strategy: str = ""
    requested_strategy: str = ""  # the strategy asked for (differs when unknown_strategy=fallback replaced it)
    chunking: str = ""
    k: int = 0
    scope: str = ""
    filters: Any = None  # the filter as the caller wrote it
    exclude_dynamic: bool = False
    exclude_tools: list[str] = field(default_factory=list)
    exclude_documents: list[str] = field(default_factory=list)
    profile: str = ""
    namespaces: list[str] | None = None
    lanes_run: list[str] = field(default_factory=list)
    fallbacks: list[str] = field(default_factory=list)  # why a lane or step degraded
    warnings: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)  # the options the search ran with, defaults included
    abstained: bool = False
    abstain_reason: str = ""
    best_dense_cosine: float | None = None  # computed when abstention is on
    cache: str = ""  # "hit" | "miss" | "" (no result cache)
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The flat JSON-like form (``details`` merged in) the CLI, the service and the query job show."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "details"}
        return {**out, **self.details}


@dataclass
class RetrievalResult:
    query: str
    items: list[RetrievedItem]
    metadata: ResultInfo = field(default_factory=ResultInfo)
