"""multi_query and hyde: a base strategy searched with the question and with what a model generated from it
(paraphrases; hypothetical answer passages), the lists fused by RRF.

They are the query transforms of the same names (ragloom.llm.transforms) run as strategies: the context's
``make_expansion``, given by the composition root, runs them, so this module never imports the model layer. They
compose with the transforms a query asks for (``reformulate`` rewrites the question first). Without a model, or
when the model fails, each is its base strategy, and ``fallbacks`` says why.
"""

from __future__ import annotations

from typing import Any

from ragloom.options import Option
from ragloom.retrieval.base import (
    POSTPROCESS_DEFAULTS,
    Retriever,
    SearchRequest,
    register_retrieval_strategy,
    strategy_class,
)
from ragloom.types import RetrievedItem

BASES = ("hybrid", "dense", "bm25")


class GeneratedQueryRetriever(Retriever):
    """The base strategy's ``get_search_results``, for the question and (through the expansion) for each
    generated query."""

    declared_options = {"base": Option("hybrid", choices=BASES, help="the strategy each query is searched with "
                                       "(and the one used when no query could be generated)")}

    def __init__(self, context: Any, chunking: str | None = None, **options: Any) -> None:
        super().__init__(context, chunking, **options)
        self._bases: dict[str, Retriever] = {}

    def _base(self, name: str) -> Retriever:
        if name not in self._bases:
            self._bases[name] = strategy_class(name)(self.context, chunking=self.chunking)
        return self._bases[name]

    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        base = self._base(options["base"])
        request.info["base_strategy"] = base.name
        own = {k: v for k, v in base.options.items() if k not in POSTPROCESS_DEFAULTS}
        return base.get_search_results(request, **own)

    def expanded(self, request: SearchRequest, ran: bool) -> None:
        name = self.implied_transforms[0]
        base = request.info.get("base_strategy", "")
        if not ran:
            request.fallbacks.append(f"{self.name}->{base}: no query generator in this context")
            return
        out = request.info.get("transforms", {}).get(name, {})
        if not out.get("queries"):
            error = out.get("error")
            request.fallbacks.append(f"{self.name}->{base}: "
                                     f"{request.context.error_text(error) if error else 'no query generated'}")


@register_retrieval_strategy("multi_query")
class MultiQueryRetriever(GeneratedQueryRetriever):
    summary = "the base strategy for the question and model-written paraphrases of it, fused (needs a model)"
    implied_transforms = ("multi_query",)


@register_retrieval_strategy("hyde")
class HydeRetriever(GeneratedQueryRetriever):
    summary = "the base strategy for the question and a model-written hypothetical answer, fused (needs a model)"
    implied_transforms = ("hyde",)
