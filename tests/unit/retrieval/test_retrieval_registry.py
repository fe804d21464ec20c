"""The retriever template and registry: ranks, metadata, post-processing, options, and the unknown-name fallback.

The strategy under test here is a real Retriever subclass that returns fixed items; no store is involved
(strategies that touch Weaviate and Neo4j are tested in tests/integration/test_retrieval.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from vector_helpers import unit

from ragloom.errors import FilterError, QueryError, RetrievalError
from ragloom.retrieval import (
    Option,
    RetrievalContext,
    Retriever,
    SearchRequest,
    available_strategies,
    get_retriever,
    register_retrieval_strategy,
)
from ragloom.retrieval.postprocess import GRAPH_SOURCE
from ragloom.types import RetrievedItem, Scope


class FixedRetriever(Retriever):
    """Returns the items it was given, and remembers the request it saw."""

    declared_options: dict[str, Option] = {"items": Option(None, kind=tuple, of=object, help="items to return"),
                                           "boost": Option(1.0, help="multiplies every score")}

    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        self.seen = request
        self.seen_where = request.where()
        request.lane("fixed")
        with request.stage("fixed"):
            items = [RetrievedItem(**{**i.__dict__, "metadata": dict(i.metadata), "lane_scores": dict(i.lane_scores)})
                     for i in options["items"] or []]
        for i in items:
            i.score *= options["boost"]
        return items[: request.fetch_k]


register_retrieval_strategy("test_fixed", FixedRetriever)


def items_with(*specs: tuple[str, float, list[float]]) -> list[RetrievedItem]:
    return [RetrievedItem(chunk_id=c, document_id=f"d-{c}", text=c, score=s, lane_scores={"dense": s},
                          metadata={"vector": v}) for c, s, v in specs]


@pytest.fixture
def context() -> RetrievalContext:
    return RetrievalContext(vectors=None)


def test_builtin_strategies_are_registered():
    assert {"dense", "bm25", "hybrid", "graph_rag", "hierarchical"} <= set(available_strategies())


def test_registration_refuses_duplicates_and_non_retrievers():
    with pytest.raises(RetrievalError, match="already registered"):
        register_retrieval_strategy("dense", FixedRetriever)
    with pytest.raises(RetrievalError, match="not a Retriever"):
        register_retrieval_strategy("not_a_retriever", dict)

    @register_retrieval_strategy("test_decorated")
    class Decorated(FixedRetriever):
        pass

    assert "test_decorated" in available_strategies() and Decorated.name == "test_decorated"


def test_unknown_strategy_is_an_error_naming_the_known_ones(context):
    with pytest.raises(QueryError, match="unknown retrieval strategy 'no_such_strategy'; choose from .*dense"):
        get_retriever("no_such_strategy", context, alpha=0.3)


def test_search_ranks_and_fills_metadata(context):
    retriever = get_retriever("test_fixed", context, chunking="semantic")
    items = items_with(("a", 0.9, unit(1, 0, 0)), ("b", 0.8, unit(0, 1, 0)), ("c", 0.7, unit(0, 0, 1)))
    result = retriever.search("  what is a?  ", k=2, items=items, scope="acme/alice")
    assert result.query == "what is a?"
    assert [(i.chunk_id, i.rank) for i in result.items] == [("a", 1), ("b", 2)]
    meta = result.metadata
    assert meta.strategy == meta.requested_strategy == "test_fixed"
    assert meta.chunking == "semantic" and meta.scope == "acme/alice" and meta.k == 2
    assert meta.lanes_run == ["fixed"] and meta.fallbacks == []
    assert meta.abstained is False and meta.abstain_reason == ""
    assert meta.best_dense_cosine == pytest.approx(0.9)
    assert {"fixed", "postprocess", "total"} <= set(meta.timings_ms)
    assert meta.timings_ms["total"] >= meta.timings_ms["fixed"]
    assert all("vector" not in i.metadata for i in result.items)  # stripped unless keep_vectors


def test_every_request_carries_the_scope(context):
    retriever = get_retriever("test_fixed", context)
    retriever.search("q", items=[], filters={"status": "ok"}, scope=Scope("acme", "bob"))
    assert retriever.seen.scope.visible_paths() == ["__shared__", "acme", "acme/bob"]
    scope_part, user_part = retriever.seen_where.children
    assert scope_part.prop == "scope_path" and sorted(scope_part.value) == ["__shared__", "acme", "acme/bob"]
    assert user_part.prop == "meta_status"
    retriever.search("q", items=[])
    assert retriever.seen_where.prop == "scope_path" and retriever.seen_where.value == ["__shared__"]


def test_near_duplicates_are_removed_and_k_is_still_filled(context):
    retriever = get_retriever("test_fixed", context)
    items = items_with(("a", 0.9, unit(1, 0, 0)), ("a-copy", 0.89, unit(1, 0.01, 0)), ("b", 0.8, unit(0, 1, 0)))
    result = retriever.search("q", k=2, items=items)
    assert [i.chunk_id for i in result.items] == ["a", "b"]  # fetch_k = 2k made room for the duplicate
    assert result.metadata.details["duplicates_removed"] == ["a-copy"]
    kept_all = retriever.search("q", k=3, items=items, dedup=False)
    assert len(kept_all.items) == 3


def test_abstention_returns_nothing_and_says_why(context):
    retriever = get_retriever("test_fixed", context)
    items = items_with(("a", 0.21, unit(1, 0)), ("b", 0.2, unit(0, 1)))
    result = retriever.search("q", k=2, items=items, abstain_floor=0.3)
    assert result.items == []
    assert result.metadata.abstained is True and "0.210" in result.metadata.abstain_reason
    assert len(retriever.search("q", k=2, items=items, abstain=False).items) == 2
    assert len(retriever.search("q", k=2, items=items, abstain_floor=0.2).items) == 2


def test_graph_context_item_stays_first_with_rank_zero(context):
    graph = RetrievedItem(chunk_id="graph:x", document_id="graph:x", text="A (ORG) -[found]-> B (PERSON)",
                          score=0.0, metadata={"source": GRAPH_SOURCE})
    items = [graph, *items_with(("a", 0.9, unit(1, 0)), ("b", 0.8, unit(0, 1)), ("c", 0.7, unit(1, 1)))]
    result = get_retriever("test_fixed", context).search("q", k=3, items=items, reorder=True)
    assert result.items[0].chunk_id == "graph:x" and result.items[0].rank == 0
    assert [(i.chunk_id, i.rank) for i in result.items[1:]] == [("a", 1), ("c", 3), ("b", 2)]  # reordered
    assert result.metadata.details["reordered"] is True


def test_keep_vectors(context):
    result = get_retriever("test_fixed", context).search("q", items=items_with(("a", 0.9, unit(1, 0))),
                                                         keep_vectors=True)
    assert result.items[0].metadata["vector"] == unit(1, 0)


@pytest.mark.parametrize("kwargs, message", [
    ({"k": 0}, "k must be"), ({"k": 201}, "k must be"), ({"k": True}, "k must be"), ({"k": "5"}, "k must be"),
    ({"bogus": 1}, "unknown option 'bogus'"), ({"dedup": "yes"}, "dedup='yes'"), ({"boost": "x"}, "boost"),
    ({"abstain_floor": None}, "abstain_floor"),
])
def test_bad_arguments_are_clear_errors(context, kwargs, message):
    retriever = get_retriever("test_fixed", context)
    with pytest.raises(RetrievalError, match=message):
        retriever.search("q", **kwargs)


def test_bad_query_scope_and_filter(context):
    retriever = get_retriever("test_fixed", context)
    for query in ("", "   ", None, 5, "x" * 4001):
        with pytest.raises(RetrievalError):
            retriever.search(query)
    with pytest.raises(FilterError, match="status"):
        retriever.search("q", filters={"status": {"regex": ".*"}})
    with pytest.raises(ValueError):  # ScopeError is a ValueError and a RagloomError
        retriever.search("q", scope="a/b/c/d/e")
    with pytest.raises(RetrievalError, match="scope must be"):
        retriever.search("q", scope=42)


def test_integers_are_accepted_for_float_options(context):
    result = get_retriever("test_fixed", context).search("q", items=items_with(("a", 0.9, unit(1, 0))), boost=2)
    assert result.items[0].score == pytest.approx(1.8)


def test_missing_embedder_is_a_clear_error(context):
    with pytest.raises(RetrievalError, match="no embedder"):
        _ = context.embedder


def test_graph_loader_failure_is_a_reason_not_a_crash():
    from ragloom.errors import StoreError

    def fail():
        raise StoreError("connection refused")

    ctx = RetrievalContext(vectors=None, load_graph=fail)
    store, why = ctx.graph()
    assert store is None and "connection refused" in why
    assert ctx.graph() == (None, "graph store unavailable: connection refused")  # not retried per query
    assert RetrievalContext(vectors=None).graph() == (None, "no graph store configured")
