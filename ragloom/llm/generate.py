"""Answer generation strategies: one small interface (``generate(question, context) -> Draft``) and a registry.

``simple`` answers in one call; ``cot`` reasons step by step and ends with an ``Answer:`` line; ``reflect``
drafts, checks each claim against the passages (JSON) and revises at most ``rounds`` times.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ragloom.errors import ConfigError, LLMOutputError
from ragloom.llm import prompts
from ragloom.llm.client import Completion, LLMClient
from ragloom.llm.prompts import PromptTemplate
from ragloom.options import Option, check_options, option_defaults
from ragloom.registry import Registry

OnToken = Callable[[str], None]


@dataclass
class Draft:
    """What a strategy produced: the answer text and what it cost."""

    text: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    calls: int = 0
    truncated: bool = False
    streamed: bool = False
    supported_share: float | None = None  # reflect: share of claims the last check found supported
    details: dict[str, Any] = field(default_factory=dict)


class GenerationStrategy(ABC):
    """Subclasses implement ``generate``; ``templates`` names every prompt they may send (for the cache key)."""

    name: ClassVar[str] = ""
    templates: ClassVar[tuple[PromptTemplate, ...]] = ()
    declared_options: ClassVar[dict[str, Option]] = {}  # each bounded: a request sets them (ragloom.query)

    def __init__(self, llm: LLMClient, max_tokens: int, temperature: float = 0.0, **options: Any) -> None:
        checked = check_options(f"generation {self.name}", self.declared_options, options)
        self.llm = llm
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.options = {**option_defaults(self.declared_options), **checked}

    @abstractmethod
    def generate(self, question: str, context: str, draft: Draft, on_token: OnToken | None) -> None:
        """Fill ``draft`` (its text, and details worth keeping)."""

    def run(self, question: str, context: str, on_token: OnToken | None = None) -> Draft:
        draft = Draft()
        self.generate(question, context, draft, on_token)
        return draft

    def params(self) -> dict[str, Any]:
        """What changes the output: part of the answer cache key."""
        return {"generation": self.name, "max_tokens": self.max_tokens, "temperature": self.temperature,
                "templates": [t.key for t in self.templates], **self.options}

    def chat(self, record: Draft, template: PromptTemplate, on_token: OnToken | None = None,
             **values: Any) -> Completion:
        """One prose call, counted into ``record`` (``values`` fill the template; one may be named draft)."""
        completion = self.llm.chat(template.render(**values), max_tokens=self.max_tokens,
                                   temperature=self.temperature, allow_truncated=True, on_token=on_token)
        self._count(record, completion)
        record.truncated = completion.truncated
        record.streamed = on_token is not None
        return completion

    def _count(self, draft: Draft, completion: Completion) -> None:
        draft.calls += 1
        draft.tokens_in += completion.tokens_in
        draft.tokens_out += completion.tokens_out


_REGISTRY: Registry[type[GenerationStrategy]] = Registry("generation strategy", GenerationStrategy)
register_generation = _REGISTRY.register


def available_generations() -> list[str]:
    return _REGISTRY.names()


def generation_options(name: str | None = None) -> dict[str, Option]:
    """The options generation ``name`` declares; None: those of every generation strategy."""
    if name is None:
        return {k: o for n in available_generations() for k, o in generation_options(n).items()}
    cls = _REGISTRY.get(name)
    if cls is None:
        raise ConfigError(f"unknown generation strategy {name!r}; choose from {', '.join(available_generations())}")
    return dict(cls.declared_options)


def get_generation(name: str, llm: LLMClient, max_tokens: int, temperature: float = 0.0,
                   **options: Any) -> GenerationStrategy:
    cls = _REGISTRY.get(name)
    if cls is None:
        raise ConfigError(f"unknown generation strategy {name!r}; choose from {', '.join(available_generations())}")
    return cls(llm, max_tokens, temperature, **options)


@register_generation("simple")
class Simple(GenerationStrategy):
    templates = (prompts.ANSWER_SIMPLE,)

    def generate(self, question: str, context: str, draft: Draft, on_token: OnToken | None) -> None:
        draft.text = self.chat(draft, prompts.ANSWER_SIMPLE, on_token, question=question, context=context).text.strip()


_ANSWER_LINE = re.compile(r"^\s*\**\s*(?:final\s+)?answer\s*\**\s*:\s*\**\s*", re.IGNORECASE | re.MULTILINE)


def split_reasoning(text: str) -> tuple[str, str]:
    """(reasoning, answer): the answer is what follows the last ``Answer:`` line; without one, all of it."""
    matches = list(_ANSWER_LINE.finditer(text))
    if not matches:
        return "", text.strip()
    last = matches[-1]
    return text[: last.start()].strip(), text[last.end():].strip()


@register_generation("cot")
class ChainOfThought(GenerationStrategy):
    templates = (prompts.ANSWER_COT,)

    def generate(self, question: str, context: str, draft: Draft, on_token: OnToken | None) -> None:
        text = self.chat(draft, prompts.ANSWER_COT, on_token, question=question, context=context).text
        draft.details["reasoning"], draft.text = split_reasoning(text)


@register_generation("reflect")
class Reflect(GenerationStrategy):
    """Draft, check each claim (JSON verdicts), revise while a claim is unsupported, at most ``rounds`` times."""

    templates = (prompts.ANSWER_SIMPLE, prompts.CHECK_CLAIMS, prompts.REVISE)
    declared_options = {
        "rounds": Option(1, min=0, max=3, help="revisions at most (each costs a check and a rewrite call)"),
        "check_max_tokens": Option(320, min=64, max=1024, help="tokens of the claim check (320: room for "
                                   "MAX_CLAIMS verdicts)"),
    }

    def generate(self, question: str, context: str, draft: Draft, on_token: OnToken | None) -> None:
        text = self.chat(draft, prompts.ANSWER_SIMPLE, question=question, context=context).text.strip()
        checks: list[dict[str, Any]] = []
        for round_ in range(self.options["rounds"] + 1):
            try:
                verdict, completion = self.llm.chat_json(
                    prompts.CHECK_CLAIMS.render(context=context, question=question, draft=text),
                    prompts.CHECK_CLAIMS.schema or {}, name=prompts.CHECK_CLAIMS.name,
                    max_tokens=self.options["check_max_tokens"])
            except LLMOutputError as e:  # an unusable verdict: keep the draft as it is, say why
                draft.details["check_error"] = str(e)
                break
            self._count(draft, completion)
            claims = verdict["claims"]
            unsupported = [c["claim"] for c in claims if not c["supported"]]
            draft.supported_share = (len(claims) - len(unsupported)) / len(claims) if claims else None
            checks.append({"draft": text, "claims": claims})
            if not unsupported or round_ == self.options["rounds"]:
                break
            text = self.chat(draft, prompts.REVISE, question=question, context=context, draft=text,
                             unsupported="; ".join(unsupported)).text.strip()
        draft.text = text
        draft.details["checks"] = checks
        draft.details["revisions"] = len(checks) - 1
        if on_token is not None:  # nothing streams while drafts are checked: hand over the final text at once
            on_token(text)
            draft.streamed = True
