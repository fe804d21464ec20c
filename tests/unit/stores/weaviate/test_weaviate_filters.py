"""The Weaviate store's translation of the filter tree (pure: builds Filter objects, no server)."""

from __future__ import annotations

from datetime import UTC, datetime

from weaviate.collections.classes.filters import _FilterAnd, _FilterNot, _FilterOr, _FilterValue

from ragloom.filters import AllOf, Condition, Not, bind, build_where, parse_filters
from ragloom.stores.weaviate import to_weaviate
from ragloom.types import Scope

TYPES = {"meta_status": "TEXT", "meta_year": "INT", "meta_published": "DATE", "meta_tags": "TEXT_ARRAY",
         "title": "TEXT"}


def check(spec, types=TYPES):
    return bind(parse_filters(spec), types)


def _value(f):
    assert isinstance(f, _FilterValue)
    return f.target, f.operator.value, f.value


def test_translation_of_each_operator():
    assert _value(to_weaviate(check({"status": "published"}))) == ("meta_status", "Equal", "published")
    assert _value(to_weaviate(check({"year": {"gte": 2020}}))) == ("meta_year", "GreaterThanEqual", 2020)
    assert _value(to_weaviate(check({"year": {"gt": 1}})))[1] == "GreaterThan"
    assert _value(to_weaviate(check({"year": {"lt": 1}})))[1] == "LessThan"
    assert _value(to_weaviate(check({"year": {"lte": 1}})))[1] == "LessThanEqual"
    assert _value(to_weaviate(check({"title": {"contains": "a b"}}))) == ("title", "Like", "*a b*")
    f = to_weaviate(check({"tags": {"contains": ["a", "b"]}}))
    assert isinstance(f, _FilterOr) and [_value(c) for c in f.filters] == [("meta_tags", "Like", "*a*"),
                                                                            ("meta_tags", "Like", "*b*")]


def test_any_of_translates_to_or_of_equals():
    f = to_weaviate(check({"year": [2020, 2021]}))
    assert isinstance(f, _FilterOr)
    assert [_value(c) for c in f.filters] == [("meta_year", "Equal", 2020), ("meta_year", "Equal", 2021)]


def test_not_and_and_translate():
    f = to_weaviate(parse_filters({"a": 1, "not": {"b": 2}}))  # schema unknown: translated as given
    assert isinstance(f, _FilterAnd)
    assert _value(f.filters[0]) == ("meta_a", "Equal", 1)
    assert isinstance(f.filters[1], _FilterNot)


def test_no_tree_is_no_filter():
    assert to_weaviate(None) is None


def test_date_values_are_passed_as_datetimes():
    f = to_weaviate(check({"published": {"lt": "2021-03-05"}}))
    assert _value(f) == ("meta_published", "LessThan", datetime(2021, 3, 5, tzinfo=UTC))


def test_nested_trees_keep_their_shape():
    tree = AllOf((Condition("a", "meta_a", "eq", 1),
                  Not(AllOf((Condition("b", "meta_b", "in", ["x", "y"]), Condition("c", "meta_c", "gt", 2))))))
    f = to_weaviate(tree)
    assert isinstance(f, _FilterAnd) and isinstance(f.filters[1], _FilterNot)
    (inner,) = f.filters[1].filters
    assert isinstance(inner, _FilterAnd)
    assert [_value(c) for c in inner.filters[0].filters] == [("meta_b", "Equal", "x"), ("meta_b", "Equal", "y")]
    assert _value(inner.filters[1]) == ("meta_c", "GreaterThan", 2)


def test_the_scoped_tree_translates_with_the_scope_first():
    f = to_weaviate(build_where(Scope("acme"), {"status": "x"}))
    assert isinstance(f, _FilterAnd)
    scope_part, user_part = f.filters
    assert [_value(c) for c in scope_part.filters] == [("scope_path", "Equal", "__shared__"),
                                                        ("scope_path", "Equal", "acme")]
    assert _value(user_part) == ("meta_status", "Equal", "x")
    # no user filter: the scope alone; a shared-only scope is one equality
    assert _value(to_weaviate(build_where(Scope(), None))) == ("scope_path", "Equal", "__shared__")
