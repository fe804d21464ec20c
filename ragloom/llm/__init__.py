"""The optional language-model layer: an OpenAI-compatible client, query transforms, answers with citations
and an answer cache. Nothing here imports dagster; without a configured model every feature degrades (the
transforms are skipped, ``ask`` returns the ranked context)."""

from ragloom.llm.answer import Answer, AnswerCitation, AnswerOptions, answer, parse_citations
from ragloom.llm.cache import AnswerCache, cache_key
from ragloom.llm.client import Completion, LLMClient
from ragloom.llm.expand import Expansion
from ragloom.llm.generate import GenerationStrategy, available_generations, get_generation, register_generation
from ragloom.llm.transforms import QueryTransform, available_transforms, get_transform, register_transform

__all__ = [
    "Answer",
    "AnswerCache",
    "AnswerCitation",
    "AnswerOptions",
    "Completion",
    "Expansion",
    "GenerationStrategy",
    "LLMClient",
    "QueryTransform",
    "answer",
    "available_generations",
    "available_transforms",
    "cache_key",
    "get_generation",
    "get_transform",
    "parse_citations",
    "register_generation",
    "register_transform",
]
