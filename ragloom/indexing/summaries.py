"""RAPTOR-lite: one summary per section of a chunking, stored as a summary level the ``raptor`` strategy
searches first.

Sections are a document's leaf chunks (the deepest level: every chunk of a flat chunking) sharing a heading
path, else windows of ``window`` consecutive chunks. Without a language model a section's summary is
extractive: its sentences closest to the section's embedding centroid (cosine; ties by position), taken best
first until the next one does not fit ``budget_tokens`` (one longer than the whole budget is skipped), and
printed in reading order: deterministic for a given embedder. With one (RAGLOOM_LLM_*) the model writes it
(prompt ``summarize_section``), cut to the budget; a section the model fails on gets the extractive summary.

Each summary carries the sha256 of its section's text and how it was made; ``build_summaries`` re-uses a
previous summary whose hash and method still match, so only changed sections are summarized again.
``sync_summaries`` keeps the previous summaries in a state file and makes the summary level (its own
collection, ``<chunking>_summaries``: ``sync_vectors`` owns a collection whole, so the chunking's own
collection cannot also hold them) hold exactly the current sections' summaries, each linked to its chunks.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ragloom import files
from ragloom.errors import ConfigError, LLMError
from ragloom.indexing.vectors import encode_cached, sync_vectors
from ragloom.llm import LLMClient, prompts
from ragloom.types import Chunk, Log, no_log, sha256_hex

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n{2,}")

Encode = Callable[[Sequence[str]], Any]
Summarize = Callable[[str], tuple[str, int]]  # section text -> (summary, its tokens)
EXTRACTIVE = "extractive"
SUMMARY_SUFFIX = "_summaries"


def summary_collection(chunking: str) -> str:
    """The store name of a chunking's summary level."""
    return f"{chunking}{SUMMARY_SUFFIX}"


@dataclass(frozen=True)
class Section:
    key: str  # document id + heading path, or document id + window number
    document_id: str
    chunk_ids: tuple[str, ...]
    text: str

    @cached_property
    def content_hash(self) -> str:
        return sha256_hex(self.text)


@dataclass(frozen=True)
class Summary:
    key: str
    content_hash: str
    text: str
    tokens: int
    method: str = EXTRACTIVE  # "extractive", or "llm:<model>"


def group_sections(chunks: Sequence[Any], window: int = 8) -> list[Section]:
    """Leaf chunks (the deepest level present; every chunk of a flat chunking) grouped by document and heading
    path; chunks without headings in windows of ``window``."""
    if window < 1:
        raise ConfigError(f"summary window={window}: at least 1 chunk per section")
    leaf = max((getattr(c, "level", 0) for c in chunks), default=0)
    groups: dict[str, list[Any]] = {}
    leaves = (c for c in chunks if getattr(c, "level", 0) == leaf)
    for chunk in sorted(leaves, key=lambda c: (c.document_id, c.position)):
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
                    count: Callable[[str], int] = word_tokens, summarize: Summarize | None = None,
                    method: str = EXTRACTIVE, log: Log = no_log) -> tuple[dict[str, Summary], list[str]]:
    """(every section's summary, the keys built now); a previous summary with the same content hash and
    method is kept. ``summarize`` (method ``llm:<model>``) writes the summary; when it fails (LLMError) the
    section gets the extractive one, which the next build tries to replace."""
    previous = previous or {}
    out: dict[str, Summary] = {}
    built: list[str] = []
    for section in sections:
        old = previous.get(section.key)
        if old is not None and old.content_hash == section.content_hash and old.method == method:
            out[section.key] = old
            continue
        made = EXTRACTIVE
        if summarize is not None:
            try:
                text, tokens = summarize(section.text)
                made = method
            except LLMError as e:
                log(f"summary of {section.key}: the model failed ({e}); extractive instead")
        if made == EXTRACTIVE:
            text, tokens = extractive_summary(section.text, encode, budget_tokens, count)
        out[section.key] = Summary(section.key, section.content_hash, text, tokens, made)
        built.append(section.key)
    return out, built


def cut_to_budget(text: str, budget_tokens: int, count: Callable[[str], int] = word_tokens) -> tuple[str, int]:
    """Whole sentences of ``text`` in order while they fit the budget (a first one too long is cut by words)."""
    kept, used = [], 0
    for sentence in sentences(text):
        n = count(sentence)
        if used + n > budget_tokens:
            if not kept:
                words = sentence.split()[:budget_tokens]
                return " ".join(words), count(" ".join(words))
            break
        kept.append(sentence)
        used += n
    return " ".join(kept), used


def llm_summarizer(client: Any, budget_tokens: int, count: Callable[[str], int] = word_tokens,
                   max_input_chars: int = 6000) -> Summarize:
    """A summarizer calling the model (prompt ``summarize_section``), its reply cut to the budget."""

    def summarize(text: str) -> tuple[str, int]:
        messages = prompts.SUMMARIZE_SECTION.render(section=text[:max_input_chars], words=str(budget_tokens))
        reply = client.chat(messages, max_tokens=2 * budget_tokens + 16, allow_truncated=True)
        summary, tokens = cut_to_budget(" ".join(reply.text.split()), budget_tokens, count)
        if not summary:
            raise LLMError("the model wrote an empty summary")
        return summary, tokens

    return summarize


def summary_chunks(chunking: str, sections: Sequence[Section], summaries: Mapping[str, Summary],
                   chunks: Sequence[Chunk]) -> list[Chunk]:
    """The summary level's objects: one per section with a non-empty summary, linked to its chunks
    (``metadata["section_chunks"]``), spanning them, in their scope, with their first chunk's metadata. Ids
    derive from the section key, its content hash and the summary's text: an unchanged section keeps its object."""
    by_id = {c.chunk_id: c for c in chunks}
    out = []
    for position, section in enumerate(sections):
        summary = summaries[section.key]
        if not summary.text:
            continue
        members = [by_id[cid] for cid in section.chunk_ids]
        first = members[0]
        out.append(Chunk(
            chunk_id=sha256_hex(f"{section.key}\x1f{summary.content_hash}\x1f{summary.text}")[:32],
            document_id=section.document_id, strategy=summary_collection(chunking), text=summary.text,
            start=min(c.start for c in members), end=max(c.end for c in members), token_count=summary.tokens,
            position=position, heading_path=list(first.heading_path),
            metadata={**first.metadata,  # the document's metadata: user filters apply to summaries too
                      "section_key": section.key, "section_chunks": list(section.chunk_ids),
                      "summary_method": summary.method},
            scope=first.scope))
    return out


def load_state(path: Path) -> dict[str, Summary]:
    """The summaries a previous build left (none when the file is missing or unreadable: all are rebuilt)."""
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))["summaries"]
        return {row["key"]: Summary(**row) for row in rows}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def save_state(path: Path, summaries: Mapping[str, Summary]) -> None:
    files.write_text(path, json.dumps({"summaries": [asdict(s) for s in summaries.values()]}))


@dataclass
class SummaryReport:
    chunking: str
    sections: int = 0
    built: int = 0  # sections summarized now (new or changed)
    reused: int = 0
    method: str = EXTRACTIVE
    llm_failures: int = 0  # sections the model failed on (extractive instead)
    summary_tokens: int = 0
    summarize_seconds: float = 0.0
    sync: dict[str, Any] = field(default_factory=dict)  # the summary level's vector sync report

    def as_metadata(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "sync"} | {
            f"sync_{k}": v for k, v in self.sync.items() if isinstance(v, int | float | str | bool)}


def state_file(root: Path, store: Any, chunking: str) -> Path:
    """Where a chunking's summary state (hash and method per section) lives under an artifacts root."""
    return root / "summaries" / f"{store.collection_name(summary_collection(chunking))}.json"


@contextlib.contextmanager
def summary_model(settings: Any, use_llm: bool) -> Iterator[Any]:
    """The configured LLM that writes summaries (closed afterwards), or None for extractive ones."""
    if not use_llm:
        yield None
        return

    llm = LLMClient.from_settings(settings)
    if llm is None:
        raise ConfigError("RAGLOOM_SUMMARY_MODE=llm but no model is configured (RAGLOOM_LLM_BASE_URL)")
    try:
        yield llm
    finally:
        llm.close()


def sync_summaries(store: Any, embedder: Any, chunking: str, chunks: Sequence[Chunk], state_path: Path, *,
                   cache: Any = None, llm: Any = None, budget_tokens: int = 120, window: int = 8,
                   log: Log = no_log) -> SummaryReport:
    """Summarize the chunking's changed sections (``llm`` when given, else extractive) and make the summary
    level hold exactly the current sections' summaries (``sync_vectors``: only new ones are embedded)."""

    report = SummaryReport(chunking)
    sections = group_sections(chunks, window)
    report.sections = len(sections)

    def encode(texts: Sequence[str]) -> Any:
        return encode_cached(embedder, cache, list(texts))[0] if cache is not None else embedder.encode(list(texts))

    summarize, method = None, EXTRACTIVE
    if llm is not None:
        summarize, method = llm_summarizer(llm, budget_tokens), f"llm:{getattr(llm, 'model', '') or 'model'}"
    report.method = method
    started = time.perf_counter()
    summaries, built = build_summaries(sections, encode, budget_tokens, load_state(state_path),
                                       summarize=summarize, method=method, log=log)
    report.summarize_seconds = round(time.perf_counter() - started, 3)
    report.built, report.reused = len(built), len(sections) - len(built)
    report.llm_failures = sum(1 for k in built if summaries[k].method != method)
    report.summary_tokens = sum(s.tokens for s in summaries.values())
    objects = summary_chunks(chunking, sections, summaries, chunks)
    report.sync = sync_vectors(store, embedder, summary_collection(chunking), objects, cache=cache,
                               log=log).as_metadata()
    save_state(state_path, summaries)  # after the store holds them: a failed sync rebuilds nothing it did not need
    log(f"{summary_collection(chunking)}: {report.sections} sections, {report.built} summarized ({method}), "
        f"{report.reused} unchanged")
    return report
