"""From a retrieval result to an answer with citations: abstain before calling the model when retrieval was
insufficient, assemble the context under a token budget (lost-in-the-middle order), look the answer up in
the cache, generate, parse the ``[n]`` citations and map them to the passages given.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ragloom.errors import ConfigError
from ragloom.llm.cache import AnswerCache, cache_key
from ragloom.llm.client import LLMClient
from ragloom.llm.generate import OnToken, available_generations, get_generation
from ragloom.retrieval.postprocess import Citation, assemble_context, is_graph_context, lost_in_the_middle
from ragloom.types import HEADING_SEPARATOR, RetrievalResult, RetrievedItem, sha256_hex

EXCERPT_CHARS = 240
NO_MODEL = "no language model is configured (set RAGLOOM_LLM_BASE_URL, or run `ragloom stack up --llm`): " \
           "here is the ranked context"

_CITATION = re.compile(r"\[\s*(\d+(?:\s*(?:[,;]|-|–)\s*\d+)*)\s*\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass
class Answer:
    question: str
    answer: str = ""
    citations: list[Citation] = field(default_factory=list)  # passages the answer cites, first cited first
    context: list[Citation] = field(default_factory=list)  # every passage the model was given
    confidence: float | None = None
    abstained: bool = False
    abstain_reason: str | None = None
    model_configured: bool = True
    message: str = ""
    uncited: bool = False  # an answer that cites none of the passages it was given
    invalid_citations: list[int] = field(default_factory=list)  # numbers cited that no passage has
    truncated: bool = False
    generation: str = ""
    model: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: dict[str, float] = field(default_factory=dict)
    cached: bool = False
    retrieval: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_citations(text: str) -> list[int]:
    """Citation numbers in order of first appearance: ``[1]``, ``[1, 3]``, ``[2][4]``, ``[1-3]``."""
    numbers: list[int] = []
    for match in _CITATION.finditer(text):
        for part in re.split(r"\s*[,;]\s*", match.group(1)):
            bounds = [int(b) for b in re.split(r"\s*[-–]\s*", part)]
            is_range = len(bounds) == 2 and 0 <= bounds[1] - bounds[0] < 20
            for n in range(bounds[0], bounds[1] + 1) if is_range else bounds:
                if n not in numbers:
                    numbers.append(n)
    return numbers


def map_citations(text: str, context: Sequence[Citation]) -> tuple[list[Citation], list[int]]:
    """(the passages cited, numbers cited that no passage has)."""
    by_number = {c.number: c for c in context}
    numbers = parse_citations(text)
    return [by_number[n] for n in numbers if n in by_number], [n for n in numbers if n not in by_number]


def grounded_share(text: str, valid: set[int]) -> float:
    """Share of the answer's sentences carrying at least one citation of a given passage."""
    sentences = [s for s in _SENTENCE_END.split(text.strip()) if s.strip()]
    if not sentences:
        return 0.0
    return sum(1 for s in sentences if set(parse_citations(s)) & valid) / len(sentences)


def confidence(text: str, valid: set[int], best_cosine: float | None, supported_share: float | None) -> float:
    """A heuristic in [0, 1], not a calibrated probability: the mean of grounding (the reflect check's share of
    supported claims, else the share of cited sentences) and the best passage's dense cosine to the question.
    0 for an answer that cites nothing it was given."""
    if not set(parse_citations(text)) & valid:
        return 0.0
    parts = [supported_share if supported_share is not None else grounded_share(text, valid)]
    if best_cosine is not None:
        parts.append(min(1.0, max(0.0, best_cosine)))
    return round(sum(parts) / len(parts), 3)


def build_context(items: Sequence[RetrievedItem], token_budget: int,
                  count_tokens: Callable[[str], int]) -> tuple[str, list[Citation], list[RetrievedItem]]:
    """The passages fitting ``token_budget`` (most relevant kept first), then placed best at both ends
    (lost in the middle), numbered in that order. Returns (text, citations, passages)."""
    _, chosen = assemble_context(items, token_budget, count_tokens)
    by_id = {i.chunk_id: i for i in items}
    picked = [by_id[c.chunk_id] for c in chosen]
    pinned = [i for i in picked if is_graph_context(i)]
    ordered = pinned + lost_in_the_middle([i for i in picked if not is_graph_context(i)])
    text, citations = assemble_context(ordered, token_budget, count_tokens)
    return text, [_citation(c, by_id[c.chunk_id]) for c in citations], ordered


def _citation(c: Citation, item: RetrievedItem) -> Citation:
    cited = Citation.of(item, c.number, EXCERPT_CHARS)
    return cited if cited.title else dataclasses.replace(cited, title=HEADING_SEPARATOR.join(item.heading_path))


@dataclass
class AnswerOptions:
    generation: str = "simple"
    max_tokens: int = 384
    temperature: float = 0.0
    token_budget: int = 1500
    generation_options: dict[str, Any] = field(default_factory=dict)
    use_cache: bool = True


def answer(question: str, result: RetrievalResult, llm: LLMClient | None, options: AnswerOptions,
           count_tokens: Callable[[str], int], cache: AnswerCache | None = None, on_token: OnToken | None = None,
           timings_ms: dict[str, float] | None = None, spent: tuple[int, int] = (0, 0)) -> Answer:
    """The answer to ``question`` from ``result`` (already retrieved). ``spent``: tokens the query's transforms
    used, added to the answer's counts; ``timings_ms``: stages already timed (retrieval)."""
    if options.generation not in available_generations():
        raise ConfigError(f"unknown generation strategy {options.generation!r}; choose from "
                          f"{', '.join(available_generations())}")  # a settings default the parser never saw
    started = time.perf_counter()
    latency = dict(timings_ms or {})
    shown = result.metadata.to_dict()
    retrieval = {k: shown[k] for k in ("strategy", "chunking", "lanes_run", "fallbacks", "transforms",
                                       "generated_queries", "original_query", "best_dense_cosine", "adaptive")
                 if k in shown}
    out = Answer(question=question, generation=options.generation, retrieval=retrieval,
                 tokens_in=spent[0], tokens_out=spent[1], model=llm.describe() if llm else "")
    if result.metadata.abstained or not result.items:
        out.abstained = True
        out.abstain_reason = result.metadata.abstain_reason or "no results"
        out.message = f"not answering: retrieval was insufficient ({out.abstain_reason})"
        return _done(out, latency, started)
    generator = get_generation(options.generation, llm, options.max_tokens, options.temperature,
                               **options.generation_options) if llm is not None else None
    with _timed(latency, "context"):
        context, out.context, passages = build_context(result.items, options.token_budget, count_tokens)
    if llm is None or generator is None:
        out.model_configured = False
        out.message = NO_MODEL
        return _done(out, latency, started)
    if not out.context:
        out.abstained = True
        out.abstain_reason = f"no passage fits the context budget of {options.token_budget} tokens"
        out.message = f"not answering: {out.abstain_reason}"
        return _done(out, latency, started)
    key = None
    if cache is not None and options.use_cache:
        with _timed(latency, "cache_lookup"):
            key = cache_key(f"{llm.model}@{llm.base_url}", generator.params(), question,
                            [(i.chunk_id, sha256_hex(i.text)) for i in passages], token_budget=options.token_budget)
            hit = cache.get(key)
        if hit is not None:
            _fill(out, hit, cached=True)
            if on_token is not None:
                on_token(out.answer)
            return _done(out, latency, started)
    with _timed(latency, "generate"):
        draft = generator.run(question, context, on_token)
    out.answer = draft.text
    out.truncated = draft.truncated
    out.tokens_in += draft.tokens_in
    out.tokens_out += draft.tokens_out
    out.details = {**draft.details, "calls": draft.calls}
    out.citations, out.invalid_citations = map_citations(draft.text, out.context)
    out.uncited = not out.citations
    out.confidence = confidence(draft.text, {c.number for c in out.context}, result.metadata.best_dense_cosine,
                                draft.supported_share)
    if out.uncited:
        out.message = "the answer cites none of the passages it was given: treat it as unsupported"
    if out.truncated:
        out.message = (out.message + "; " if out.message else "") + \
            f"the answer was cut at max_tokens={options.max_tokens}"
    if key is not None and cache is not None:
        cache.put(key, _cacheable(out, draft.tokens_in, draft.tokens_out))
    return _done(out, latency, started)


def _cacheable(out: Answer, tokens_in: int, tokens_out: int) -> dict[str, Any]:
    return {"answer": out.answer, "citations": [asdict(c) for c in out.citations],
            "invalid_citations": out.invalid_citations, "uncited": out.uncited, "confidence": out.confidence,
            "truncated": out.truncated, "message": out.message, "details": out.details,
            "generated_tokens": {"in": tokens_in, "out": tokens_out}}


def _fill(out: Answer, hit: dict[str, Any], cached: bool) -> None:
    out.answer = hit["answer"]
    out.citations = [Citation.from_dict(c) for c in hit["citations"]]
    out.invalid_citations = list(hit["invalid_citations"])
    out.uncited = bool(hit["uncited"])
    out.confidence = hit["confidence"]
    out.truncated = bool(hit["truncated"])
    out.message = hit["message"]
    out.details = {**hit["details"], "generated_tokens": hit["generated_tokens"]}
    out.cached = cached


class _timed:
    def __init__(self, latency: dict[str, float], stage: str) -> None:
        self.latency, self.stage = latency, stage

    def __enter__(self) -> None:
        self.started = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.latency[self.stage] = round((time.perf_counter() - self.started) * 1000, 3)


def _done(out: Answer, latency: dict[str, float], started: float) -> Answer:
    latency["answer_total"] = round((time.perf_counter() - started) * 1000, 3)
    out.latency_ms = latency
    return out
