"""RAPTOR-lite, extractive: one summary per section, built without a language model.

Sections are a document's chunks sharing a heading path, else windows of ``window`` consecutive chunks. A
section's summary is its sentences closest to the section's embedding centroid (cosine; ties by position),
taken best first until the next one does not fit ``budget_tokens`` (one longer than the whole budget
is skipped), and printed in reading order: deterministic for a given
embedder. Each summary carries the sha256 of its section's text; ``build_summaries`` re-uses a previous
summary whose hash still matches, so only changed sections are embedded again.

Not done yet (issue 19): the summary level in the hierarchical collection, its Dagster asset, retrieval over
it, and LLM-written summaries.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragloom.errors import ConfigError

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n{2,}")

Encode = Callable[[Sequence[str]], Any]


@dataclass(frozen=True)
class Section:
    key: str  # document id + heading path, or document id + window number
    document_id: str
    chunk_ids: tuple[str, ...]
    text: str

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


@dataclass(frozen=True)
class Summary:
    key: str
    content_hash: str
    text: str
    tokens: int


def group_sections(chunks: Sequence[Any], window: int = 8) -> list[Section]:
    """Chunks (level 0 only) grouped by document and heading path; chunks without headings in windows."""
    if window < 1:
        raise ConfigError(f"summary window={window}: at least 1 chunk per section")
    groups: dict[str, list[Any]] = {}
    for chunk in sorted((c for c in chunks if getattr(c, "level", 0) == 0), key=lambda c: (c.document_id, c.position)):
        if chunk.heading_path:
            key = f"{chunk.document_id}#" + " > ".join(chunk.heading_path)
        else:
            key = f"{chunk.document_id}@{chunk.position // window}"
        groups.setdefault(key, []).append(chunk)
    return [Section(key, members[0].document_id, tuple(c.chunk_id for c in members),
                    "\n\n".join(c.text for c in members)) for key, members in groups.items()]


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def word_tokens(text: str) -> int:
    return len(text.split())


def extractive_summary(text: str, encode: Encode, budget_tokens: int,
                       count: Callable[[str], int] = word_tokens) -> tuple[str, int]:
    """(the summary, its token count <= budget_tokens). A first sentence over the budget alone is skipped."""
    if budget_tokens < 1:
        raise ConfigError(f"summary budget={budget_tokens}: at least 1 token")
    parts = sentences(text)
    if not parts:
        return "", 0
    vectors = np.asarray(encode(parts), dtype=np.float64)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    centroid = vectors.mean(axis=0)
    centroid /= max(float(np.linalg.norm(centroid)), 1e-12)
    closeness = vectors @ centroid
    order = sorted(range(len(parts)), key=lambda i: (-round(float(closeness[i]), 6), i))
    chosen, used = [], 0
    for i in order:  # a prefix of the ranking: filling leftover room with off-topic short sentences reads worse
        n = count(parts[i])
        if n > budget_tokens:
            continue
        if used + n > budget_tokens:
            break
        chosen.append(i)
        used += n
    return " ".join(parts[i] for i in sorted(chosen)), used


def build_summaries(sections: Sequence[Section], encode: Encode, budget_tokens: int = 120,
                    previous: Mapping[str, Summary] | None = None,
                    count: Callable[[str], int] = word_tokens) -> tuple[dict[str, Summary], list[str]]:
    """(every section's summary, the keys built now); a previous summary with the same content hash is kept."""
    previous = previous or {}
    out: dict[str, Summary] = {}
    built: list[str] = []
    for section in sections:
        old = previous.get(section.key)
        if old is not None and old.content_hash == section.content_hash:
            out[section.key] = old
            continue
        text, tokens = extractive_summary(section.text, encode, budget_tokens, count)
        out[section.key] = Summary(section.key, section.content_hash, text, tokens)
        built.append(section.key)
    return out, built
