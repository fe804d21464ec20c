"""The one query parser (ragloom.query): one policy for every door."""

from __future__ import annotations

import pytest

from ragloom.errors import QueryError, RetrievalError
from ragloom.filters import Condition
from ragloom.query import FIELDS, fallback_warning, parse_query
from ragloom.retrieval import available_strategies
from ragloom.retrieval.query import MAX_K, Query
from ragloom.types import Scope


def test_a_plain_query_gets_the_defaults():
    q = parse_query(text="  who leads HarborSight?  ")
    assert q == Query(text="who leads HarborSight?")
    assert q.strategy == "hybrid" and q.k == 5 and q.scope == Scope() and q.namespaces is None
    assert q.transforms is None and not q.skips_retrieval


def test_every_field_is_typed_once():
    q = parse_query({"text": "x", "strategy": "graph_rag", "k": 7, "chunking": "semantic", "scope": "acme/alice",
                     "filters": '{"year": {"gte": 2020}}', "options": {"damping": 0.4},
                     "transforms": "prf", "transform_options": {"prf": {"terms": 5}}, "exclude_dynamic": True,
                     "namespaces": ["learning", "learning"], "generation": "reflect",
                     "generation_options": {"rounds": 2}, "token_budget": 900, "use_cache": False})
    assert q.scope == Scope("acme", "alice") and q.chunking == "semantic" and q.k == 7
    assert isinstance(q.filters, Condition) and q.filter_spec == '{"year": {"gte": 2020}}'
    assert q.options == {"damping": 0.4} and q.transforms == ("prf",) and q.transform_options == {"prf": {"terms": 5}}
    assert q.namespaces == ("learning",) and q.exclude_dynamic is True
    assert q.generation == "reflect" and q.generation_options == {"rounds": 2} and q.token_budget == 900


def test_unknown_strategy_is_an_error_naming_the_known_ones():
    with pytest.raises(QueryError, match="unknown retrieval strategy 'multi_querry'; choose from") as e:
        parse_query(text="x", strategy="multi_querry")
    assert all(name in str(e.value) for name in available_strategies())


def test_the_fallback_is_an_explicit_choice():
    q = parse_query(text="x", strategy="nope", unknown_strategy="fallback", options={"alpha": 0.3, "dedup": False})
    assert q.strategy == "dense" and q.requested_strategy == "nope"
    assert q.options == {"dedup": False}  # what dense does not declare is dropped, not refused
    assert "unknown retrieval strategy 'nope'" in fallback_warning(q)
    with pytest.raises(QueryError, match="unknown_strategy='sometimes'"):
        parse_query(text="x", unknown_strategy="sometimes")


@pytest.mark.parametrize(("fields", "message"), [
    ({"strategy": "hybrid", "options": {"alpha": 2}}, "alpha takes number 0 to 1"),
    ({"strategy": "dense", "options": {"alpha": 0.5}}, "dense: unknown option 'alpha'"),
    ({"strategy": "adaptive", "options": {"router_model": "/tmp/x.pkl"}}, "unknown option 'router_model'"),
    ({"options": {"generation_options": {"rounds": 10**9}}}, "unknown option 'generation_options'"),
    ({"options": {"scope": "other/tenant"}}, "unknown option 'scope'"),
    ({"options": "{not json"}, "options are not valid JSON"),
    ({"k": 0}, f"k must be an integer from 1 to {MAX_K}"),
    ({"k": True}, "k must be an integer"),
    ({"chunking": "nope"}, "chunking='nope': choose one of"),
    ({"transforms": ["hyde", "nope"]}, r"unknown query transform\(s\) \['nope'\]"),
    ({"transform_options": {"multi_query": {"n": 10**6}}}, "n takes integer 1 to 8"),
    ({"transform_options": {"hyde": {"max_tokens": "many"}}}, "max_tokens takes integer 16 to 512"),
    ({"transform_options": {"prf": {"docs": 10**6}}}, "docs takes integer 1 to 50"),
    ({"generation": "reflect", "generation_options": {"rounds": 10**9}}, "rounds takes integer 0 to 3"),
    ({"generation": "reflect", "generation_options": {"rounds": "many"}}, "rounds takes integer 0 to 3"),
    ({"generation": "poem"}, "unknown generation strategy 'poem'"),
    ({"token_budget": 10**9}, "token_budget must be an integer from 1 to"),
    ({"namespaces": "learning"}, "namespaces must be a list"),
    ({"namespaces": ["a\x00b"]}, "namespaces: each is a name"),
    ({"exclude_dynamic": "yes"}, "exclude_dynamic must be true or false"),
    ({"colour": "blue"}, r"unknown query field\(s\) \['colour'\]"),
])
def test_bad_input_is_a_clear_error(fields, message):
    with pytest.raises(QueryError, match=message):
        parse_query({"text": "x", **fields})


def test_errors_are_the_retrieval_family_the_doors_map_to_400():
    assert issubclass(QueryError, RetrievalError)


def test_empty_namespaces_skip_retrieval_absent_means_all():
    assert parse_query(text="x", namespaces=[]).skips_retrieval
    assert parse_query(text="x", namespaces=None).namespaces is None
    assert parse_query(text="x").namespaces is None


def test_option_pairs_from_a_command_line_win_over_options():
    q = parse_query(text="x", strategy="hybrid", options='{"alpha": 0.2}', option_pairs=["alpha=0.7",
                                                                                         "lanes=dense,bm25"])
    assert q.options == {"alpha": 0.7, "lanes": ("dense", "bm25")}
    with pytest.raises(QueryError, match="should look like key=value"):
        parse_query(text="x", option_pairs=["alpha"])


def test_the_fields_are_documented():
    assert set(FIELDS) >= {"text", "strategy", "k", "filters", "scope", "options", "namespaces"}
    assert all(FIELDS.values())
