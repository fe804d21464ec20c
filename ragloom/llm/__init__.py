"""The optional language-model layer: an OpenAI-compatible client, prompts, query transforms, generation strategies
and an answer cache. Answers with citations are composed above retrieval, in ``ragloom.answer``. A model client
like the embedder: it sits below retrieval, which uses it for multi_hop's follow-ups and adaptive's LLM router.
Without a configured model every feature degrades (transforms are skipped, ``ask`` returns the ranked context)."""

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

__all__ = [
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
