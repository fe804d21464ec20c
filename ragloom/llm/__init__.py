"""The optional language-model layer: an OpenAI-compatible client, prompts, query transforms, generation strategies
and an answer cache. Answers with citations are composed above retrieval, in ``ragloom.answer``. A model client
like the embedder: it sits below retrieval, which uses it for multi_hop's follow-ups and adaptive's LLM router.
Without a configured model every feature degrades (transforms are skipped, ``ask`` returns the ranked context)."""

from collections.abc import Sequence

from ragloom.errors import ConfigError
from ragloom.llm.cache import AnswerCache, cache_key
from ragloom.llm.client import Completion, LLMClient
from ragloom.llm.expand import Expansion
from ragloom.llm.generate import (
    GenerationStrategy,
    available_generations,
    generation_options,
    get_generation,
    register_generation,
)
from ragloom.llm.transforms import (
    QueryTransform,
    available_transforms,
    get_transform,
    register_transform,
    transform_options,
)


def check_names(transforms: Sequence[str] = (), generation: str | None = None) -> None:
    """Fail early, before anything connects, on an unknown transform or generation strategy name."""
    unknown = [t for t in transforms if t not in available_transforms()]
    if unknown:
        raise ConfigError(f"unknown query transform(s) {unknown}; choose from {', '.join(available_transforms())}")
    if generation is not None and generation not in available_generations():
        raise ConfigError(f"unknown generation strategy {generation!r}; choose from "
                          f"{', '.join(available_generations())}")


__all__ = [
    "check_names",
    "AnswerCache",
    "Completion",
    "Expansion",
    "GenerationStrategy",
    "LLMClient",
    "QueryTransform",
    "available_generations",
    "available_transforms",
    "cache_key",
    "generation_options",
    "transform_options",
    "get_generation",
    "get_transform",
    "register_generation",
    "register_transform",
]
