"""Query transforms: one small interface (``generate(question, first_pass) -> queries``) and a registry.

``phase`` says when a transform runs: ``rewrite`` replaces the query before the strategy runs
(reformulate), ``expand`` adds queries generated from the question alone (multi_query, hyde, step_back,
decompose), ``feedback`` adds queries built from the first pass's results (prf: pseudo-relevance feedback,
no model needed). ragloom.llm.expand runs them and fuses their result lists.
"""

from __future__ import annotations

import math
import re
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ragloom.errors import ConfigError, RagloomError
from ragloom.llm import prompts
from ragloom.llm.client import Completion, LLMClient
from ragloom.llm.prompts import PromptTemplate
from ragloom.options import Option, check_options, option_defaults
from ragloom.registry import Registry
from ragloom.types import RetrievedItem

MAX_GENERATED = 8  # queries one transform may add


@dataclass
class TransformOutput:
    """What one transform produced for one question (``error`` set when it produced nothing usable)."""

    name: str
    queries: list[str] = field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    calls: int = 0
    latency_ms: float = 0.0
    json_modes: list[str] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"queries": self.queries, "tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                "calls": self.calls, "latency_ms": round(self.latency_ms, 1), "json_modes": self.json_modes,
                "error": self.error}


class QueryTransform(ABC):
    """Subclasses implement ``generate``; ``run`` times it, counts tokens and turns failures into ``error``.

    A new instance per question: token counts are the instance's own.
    """

    name: ClassVar[str] = ""
    phase: ClassVar[str] = "expand"
    needs_llm: ClassVar[bool] = True
    declared_options: ClassVar[dict[str, Option]] = {}  # each bounded: a request sets them (ragloom.query)

    def __init__(self, llm: LLMClient | None, **options: Any) -> None:
        self.llm = llm
        self.options = {**option_defaults(self.declared_options),
                        **check_options(f"transform {self.name}", self.declared_options, options)}
        self._out = TransformOutput(self.name)

    @abstractmethod
    def generate(self, question: str, first_pass: Sequence[RetrievedItem]) -> list[str]:
        """Queries (or passages) to search with, best first."""

    def run(self, question: str, first_pass: Sequence[RetrievedItem] = ()) -> TransformOutput:
        started = time.perf_counter()
        out = self._out
        if self.needs_llm and self.llm is None:
            out.error = "skipped: no language model configured (RAGLOOM_LLM_BASE_URL)"
            return out
        try:
            out.queries = _clean(self.generate(question, first_pass), question)[:MAX_GENERATED]
        except RagloomError as e:
            out.error = f"{type(e).__name__}: {e}"
        out.latency_ms = (time.perf_counter() - started) * 1000
        if not out.queries and out.error is None:
            out.error = "produced no usable query"
        return out

    # what subclasses call ---------------------------------------------------------------------------
    def _count(self, completion: Completion) -> None:
        self._out.calls += 1
        self._out.tokens_in += completion.tokens_in
        self._out.tokens_out += completion.tokens_out
        if completion.json_mode:
            self._out.json_modes.append(completion.json_mode)

    def ask_json(self, template: PromptTemplate, max_tokens: int, schema: dict[str, Any] | None = None,
                 **values: Any) -> Any:
        schema = schema or template.schema
        assert self.llm is not None and schema is not None
        value, completion = self.llm.chat_json(template.render(**values), schema, name=template.name,
                                               max_tokens=max_tokens)
        self._count(completion)
        return value

    def ask_text(self, template: PromptTemplate, max_tokens: int, temperature: float = 0.0, **values: Any) -> str:
        assert self.llm is not None
        # a generated passage cut at max_tokens still serves as a search text
        completion = self.llm.chat(template.render(**values), max_tokens=max_tokens, temperature=temperature,
                                   allow_truncated=True)
        self._count(completion)
        return completion.text


def _clean(queries: Sequence[Any], question: str) -> list[str]:
    """Strings only, whitespace collapsed, no empties, no repeats, not the question itself."""
    seen = {" ".join(question.lower().split())}
    out = []
    for q in queries:
        if not isinstance(q, str):
            continue
        text = " ".join(q.split()).strip(' "\'')
        key = text.lower()
        if text and key not in seen:
            seen.add(key)
            out.append(text)
    return out



# registry -------------------------------------------------------------------------------------------------
_REGISTRY: Registry[type[QueryTransform]] = Registry("transform", QueryTransform)
register_transform = _REGISTRY.register


def available_transforms() -> list[str]:
    return _REGISTRY.names()


def transform_options(name: str) -> dict[str, Option]:
    """The options transform ``name`` declares (an unknown name is a ConfigError listing the known ones)."""
    cls = _REGISTRY.get(name)
    if cls is None:
        raise ConfigError(f"unknown query transform {name!r}; choose from {', '.join(available_transforms())}")
    return dict(cls.declared_options)


def get_transform(name: str, llm: LLMClient | None, **options: Any) -> QueryTransform:
    cls = _REGISTRY.get(name)
    if cls is None:
        raise ConfigError(f"unknown query transform {name!r}; choose from {', '.join(available_transforms())}")
    return cls(llm, **options)


# the transforms -------------------------------------------------------------------------------------------
class _OneQuery(QueryTransform):
    """One query the model writes from the question (``prompt`` answers ``{"query": ...}``)."""

    prompt: ClassVar[PromptTemplate]

    def generate(self, question: str, first_pass: Sequence[RetrievedItem]) -> list[str]:
        return [self.ask_json(self.prompt, prompts.QUERY_REPLY_TOKENS, question=question)["query"]]


class _QueryList(QueryTransform):
    """Up to ``n`` queries the model writes from the question (``prompt`` answers ``{key: [...]}``)."""

    prompt: ClassVar[PromptTemplate]
    key: ClassVar[str]
    declared_options = {"n": Option(3, min=1, max=MAX_GENERATED, help="queries to generate")}

    def generate(self, question: str, first_pass: Sequence[RetrievedItem]) -> list[str]:
        n = self.options["n"]
        return self.ask_json(self.prompt, prompts.list_reply_tokens(n), prompts.string_list_schema(self.key, n),
                             question=question, n=n)[self.key][:n]


@register_transform("reformulate")
class Reformulate(_OneQuery):
    """One self-contained search query replacing the question (the strategy then runs on it)."""

    phase = "rewrite"
    prompt = prompts.REFORMULATE


@register_transform("multi_query")
class MultiQuery(_QueryList):
    """``n`` paraphrases of the question, each searched and fused."""

    prompt, key = prompts.MULTI_QUERY, "queries"


@register_transform("hyde")
class Hyde(QueryTransform):
    """``n`` hypothetical answer passages, embedded with ragloom's embedder and searched (HyDE)."""

    declared_options = {"n": Option(1, min=1, max=MAX_GENERATED, help="hypothetical passages to generate"),
                        "max_tokens": Option(96, min=16, max=512, help="tokens per passage (96: two to four "
                                             "sentences)")}

    def generate(self, question: str, first_pass: Sequence[RetrievedItem]) -> list[str]:
        n, max_tokens = self.options["n"], self.options["max_tokens"]
        temperature = 0.0 if n == 1 else 0.7  # several passages only differ when sampled

        def one(_: int) -> str:
            return self.ask_text(prompts.HYDE, max_tokens, temperature=temperature, question=question)

        if n == 1:
            return [one(0)]
        with ThreadPoolExecutor(max_workers=n) as pool:
            return list(pool.map(one, range(n)))


@register_transform("step_back")
class StepBack(_OneQuery):
    """One more general question whose answer gives the background (step-back prompting)."""

    prompt = prompts.STEP_BACK


@register_transform("decompose")
class Decompose(_QueryList):
    """Up to ``n`` sub-questions, each searched; their results are fused with the question's."""

    prompt, key = prompts.DECOMPOSE, "questions"


@register_transform("prf")
class PseudoRelevanceFeedback(QueryTransform):
    """The question plus ``terms`` expansion terms weighted RM3-style over the first pass's top ``docs``."""

    phase = "feedback"
    needs_llm = False
    declared_options = {"docs": Option(5, min=1, max=50, help="first-pass items the terms are drawn from"),
                        "terms": Option(10, min=1, max=50, help="expansion terms added to the question")}

    def generate(self, question: str, first_pass: Sequence[RetrievedItem]) -> list[str]:
        top = [i for i in first_pass if i.text][: self.options["docs"]]
        terms = feedback_terms(question, [i.text for i in top], [i.score for i in top], self.options["terms"])
        return [f"{question} {' '.join(terms)}"] if terms else []


class FollowUp(QueryTransform):
    """One follow-up query from the question and the ``passages`` best results found so far (multi_hop's
    LLM hop, MATIH's follow-up generation). Not a registered transform: multi_hop runs it between rounds.
    An empty reply means the model saw nothing missing (``error`` "produced no usable query")."""

    name = "follow_up"
    phase = "feedback"
    declared_options = {"passages": Option(3, min=1, max=20, help="best results so far shown to the model"),
                        "passage_chars": Option(400, min=50, max=4000, help="characters shown of each")}

    def generate(self, question: str, first_pass: Sequence[RetrievedItem]) -> list[str]:
        top = [i for i in first_pass if i.text][: self.options["passages"]]
        passages = "\n".join(f"[{n}] {' '.join(i.text.split())[: self.options['passage_chars']]}"
                             for n, i in enumerate(top, 1)) or "(none)"
        return [self.ask_json(prompts.FOLLOW_UP, prompts.QUERY_REPLY_TOKENS, question=question,
                              passages=passages)["query"]]


_WORD = re.compile(r"[a-z][a-z0-9\-]{2,}")


# English function words and question words: never useful as expansion terms. Kept here rather than importing
# scikit-learn's list, whose import costs seconds on a busy machine in the query path.
STOPWORDS = frozenset("""
a about above after again against all also am an and any are aren as at be because been before being below
between both but by can cannot could did didn do does doesn doing don down during each either else ever
every few for from further had has have having he her here hers herself him himself his how however i if in
into is isn it its itself just least less let like made make many may me might more most much must my
myself neither no nor not now of off often on once one only or other others otherwise our ours ourselves
out over own per perhaps rather same several shall she should since so some such than that the their theirs
them themselves then there therefore these they this those though through thus to too toward under until up
upon us use used using very via was wasn we were weren what whatever when where whether which while who whom
whose why will with within without would yet you your yours yourself yourselves
""".split())


def feedback_terms(question: str, texts: Sequence[str], scores: Sequence[float], n_terms: int) -> list[str]:
    """RM3's relevance model over feedback documents: weight(w) = sum_d P(w|d) * P(d|q), with P(w|d) the term's
    share of d's words and P(d|q) the documents' scores shifted positive and normalized. Stop words and the
    question's own words are left out; ties break alphabetically so the result is deterministic."""
    if not texts or n_terms <= 0:
        return []
    stop = STOPWORDS
    asked = set(_WORD.findall(question.lower()))
    low = min(scores) if scores else 0.0
    prior = [s - low + 1e-3 for s in scores] if scores else [1.0] * len(texts)
    total = sum(prior)
    weights: Counter[str] = Counter()
    for text, p in zip(texts, prior, strict=False):
        words = [w for w in _WORD.findall(text.lower()) if w not in stop]
        if not words:
            continue
        for word, count in Counter(words).items():
            if word not in asked:
                weights[word] += count / len(words) * p / total
    ranked = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))
    return [w for w, weight in ranked[:n_terms] if weight > 0 and math.isfinite(weight)]
