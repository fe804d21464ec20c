"""multi_query and hyde as strategies: without a generator in the context they are their base, and say so."""

from __future__ import annotations

from typing import Any

from ragloom.retrieval import RetrievalContext, strategy_class
from ragloom.retrieval.base import SearchRequest
from ragloom.types import RetrievedItem


class _Base:
    """Stands in for the base strategy's lane (no store needed to check the bookkeeping)."""

    name = "dense"
    options: dict[str, Any] = {}

    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        return []


def test_declared_and_described() -> None:
    for name in ("multi_query", "hyde"):
        cls = strategy_class(name)
        assert cls.implied_transforms == (name,)
        assert cls.declared_options["base"].choices == ("hybrid", "dense", "bm25")


def test_no_generator_is_a_fallback_to_the_base() -> None:
    retriever = strategy_class("hyde")(RetrievalContext(None))
    retriever._bases["dense"] = _Base()  # type: ignore[assignment]
    request = SearchRequest(query="q", k=3, scope=None, filters=None, chunking="recursive",  # type: ignore[arg-type]
                            context=retriever.context, fetch_k=3, include_vectors=False)
    assert retriever.get_search_results(request, base="dense") == []
    retriever.expanded(request, ran=False)
    assert request.fallbacks == ["hyde->dense: no query generator in this context"]
    request.fallbacks.clear()
    request.info["transforms"] = {"hyde": {"queries": [], "error": "skipped: no language model configured"}}
    retriever.expanded(request, ran=True)
    assert request.fallbacks == ["hyde->dense: skipped: no language model configured"]
