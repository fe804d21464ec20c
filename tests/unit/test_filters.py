"""The filter language: parsing to the tree, binding to a schema, edge and hostile input, the scoped tree."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.errors import FilterError, RagloomError
from ragloom.filters import (
    MATCHES_NOTHING,
    MAX_CONDITIONS,
    MAX_DEPTH,
    MAX_LIST,
    AllOf,
    Condition,
    Not,
    bind,
    build_where,
    parse_filters,
    parse_iso_date,
    scope_condition,
)
from ragloom.stores.weaviate import to_weaviate
from ragloom.types import Scope

TYPES = {"meta_status": "TEXT", "meta_year": "INT", "meta_score": "NUMBER", "meta_published": "DATE",
         "meta_tags": "TEXT_ARRAY", "meta_flag": "BOOL", "title": "TEXT", "level": "INT"}


def check(spec, types=TYPES):
    return bind(parse_filters(spec), types)


def test_exact_value_on_user_metadata_maps_to_meta_property():
    assert parse_filters({"status": "published"}) == Condition("status", "meta_status", "eq", "published")


def test_core_fields_map_to_themselves():
    node = parse_filters({"document_id": "d1", "level": 2, "heading_path": {"contains": "Methods"}})
    assert node == AllOf((
        Condition("document_id", "document_id", "eq", "d1"),
        Condition("level", "level", "eq", 2),
        Condition("heading_path", "heading_path", "contains", ["Methods"]),
    ))


def test_list_is_any_of():
    assert parse_filters({"status": ["a", "b"]}) == Condition("status", "meta_status", "in", ["a", "b"])
    assert parse_filters({"status": {"in": ["a"]}}) == Condition("status", "meta_status", "in", ["a"])


def test_numeric_range_gives_one_condition_per_bound():
    node = parse_filters({"year": {"gte": 2020, "lt": 2024}})
    assert node == AllOf((Condition("year", "meta_year", "gte", 2020), Condition("year", "meta_year", "lt", 2024)))


def test_iso_date_range_becomes_aware_datetimes():
    node = parse_filters({"published": {"gt": "2021-03-01", "lte": "2021-03-31T23:59:59+02:00"}})
    assert isinstance(node, AllOf)
    low, high = node.children
    assert low.value == datetime(2021, 3, 1, tzinfo=UTC)
    assert high.value == datetime(2021, 3, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=2)))


def test_iso_date_equality_becomes_a_date_where_the_field_is_a_date():
    assert check({"published": "2021-03-01"}).value == datetime(2021, 3, 1, tzinfo=UTC)
    assert check({"status": "2021-03-01"}).value == "2021-03-01"  # a TEXT field keeps the text
    assert check({"title": "2021-03-01"}, None).value == "2021-03-01"  # core text field, schema unknown
    assert check({"published": "2021-03-01"}, None).value == datetime(2021, 3, 1, tzinfo=UTC)  # ingestion's rule


def test_values_are_converted_to_the_field_type():
    assert check({"status": 5}).value == "5"  # mixed values were stored as their str()
    assert check({"score": 2}).value == 2.0
    assert check({"year": 2021.0}).value == 2021
    assert check({"tags": ["a", "b"]}).value == ["a", "b"]
    assert check({"flag": True}).value is True


def test_contains_takes_one_or_several_substrings():
    assert parse_filters({"title": {"contains": "neural net"}}) == Condition("title", "title", "contains",
                                                                            ["neural net"])
    node = parse_filters({"tags": {"contains": ["x", "y"]}})
    assert (node.op, node.value) == ("contains", ["x", "y"])


def test_not_wraps_a_whole_filter_and_nests():
    node = parse_filters({"not": {"status": "draft", "not": {"year": 2020}}})
    assert node == Not(AllOf((Condition("status", "meta_status", "eq", "draft"),
                              Not(Condition("year", "meta_year", "eq", 2020)))))


def test_field_level_not():
    assert parse_filters({"status": {"not": "draft"}}) == Not(Condition("status", "meta_status", "eq", "draft"))
    assert parse_filters({"year": {"not": {"lt": 2000}}}) == Not(Condition("year", "meta_year", "lt", 2000))


def test_keys_are_anded_in_order():
    node = parse_filters({"a": 1, "b": True, "c": 1.5})
    assert isinstance(node, AllOf)
    assert [c.prop for c in node.children] == ["meta_a", "meta_b", "meta_c"]


def test_json_text_is_accepted_and_empty_means_no_filter():
    assert parse_filters('{"status": "published"}') == parse_filters({"status": "published"})
    for empty in (None, "", "   ", {}, "{}"):
        assert parse_filters(empty) is None


def test_keys_are_sanitized_like_ingestion():
    assert parse_filters({"Pub-Date": 1}).prop == "meta_pub_date"
    assert parse_filters({"a.b c": 1}).prop == "meta_a_b_c"


@pytest.mark.parametrize("spec, field, words", [
    ({"status": {"like": "x"}}, "status", "unknown operator"),
    ({"status": {"$where": "1"}}, "status", "unknown operator"),
    ({"level": "2"}, "level", "cannot be compared with this INT"),
    ({"level": 1.5}, "level", "not an integer"),
    ({"level": True}, "level", "cannot be compared"),
    ({"year": "2021"}, "year", "cannot be compared with this INT"),
    ({"flag": 1}, "flag", "cannot be compared with this BOOL"),
    ({"published": "yesterday"}, "published", "cannot be compared with this DATE"),
    ({"title": {"gte": 3}}, "title", "cannot be compared with this TEXT"),
    ({"published": {"gte": 3}}, "published", "a number cannot be compared with this DATE"),
    ({"year": {"gte": "2020-01-01"}}, "year", "a date cannot be compared with this INT"),
    ({"level": {"contains": "x"}}, "level", "'contains' works on text"),
    ({"unknown_key": "x"}, "unknown_key", "no chunk in this collection"),
    ({"not": {"unknown_key": "x"}}, "unknown_key", "meta_unknown_key"),
    ({"year": {"gte": "last year"}}, "year", "ISO date"),
    ({"year": {"gte": True}}, "year", "ISO date"),
    ({"year": {"gte": None}}, "year", "ISO date"),
    ({"year": {"gte": float("nan")}}, "year", "finite"),
    ({"year": float("inf")}, "year", "finite"),
    ({"year": {"gte": 2020, "lt": "2024-01-01"}}, "year", "mixes dates and numbers"),
    ({"status": []}, "status", "empty list"),
    ({"status": ["a", 1]}, "status", "mixes value types"),
    ({"status": [["a"]]}, "status", "unsupported value"),
    ({"status": None}, "status", "null"),
    ({"status": {}}, "status", "empty operator"),
    ({"status": {"in": "a"}}, "status", "expects a list"),
    ({"status": {"contains": []}}, "status", "non-empty list"),
    ({"status": {"contains": 5}}, "status", "string or"),
    ({"or": [{"a": 1}]}, "or", "not supported"),
    ({"scope_path": "acme"}, "scope_path", "scope argument"),
    ({"not": "draft"}, "not", "filter object"),
    ({"not": {}}, "not", "empty object"),
])
def test_invalid_filters_name_the_field(spec, field, words):
    with pytest.raises(FilterError) as err:
        check(spec)
    assert field in str(err.value) and words in str(err.value)


def test_hide_schema_turns_unknown_and_mistyped_metadata_into_match_nothing():
    """The service's mode: no error may reveal which metadata keys the (shared) collection schema holds."""
    for spec in ({"unknown_key": "x"}, {"year": "2021"}, {"published": {"gte": 3}}):
        assert bind(parse_filters(spec), TYPES, hide_schema=True) == MATCHES_NOTHING, spec
    node = bind(parse_filters({"status": "ok", "not": {"unknown_key": "x"}}), TYPES, hide_schema=True)
    assert node == AllOf((Condition("status", "meta_status", "eq", "ok"), Not(MATCHES_NOTHING)))
    assert bind(parse_filters({"year": 2021}), TYPES, hide_schema=True).value == 2021  # known fields: as before
    with pytest.raises(FilterError, match="cannot be compared with this INT"):  # core fields still say why
        bind(parse_filters({"level": "2"}), TYPES, hide_schema=True)


@pytest.mark.parametrize("key", [
    'x"}) DETACH DELETE n //', "status; DROP", "a/b", "$where", "__proto__[x]", "", "k" * 65, "é", "a\nb",
])
def test_hostile_field_names_are_refused(key):
    with pytest.raises(FilterError, match="names may use"):
        parse_filters({key: "v"})


def test_hostile_values_are_plain_data():
    hostile = 'x"}) DETACH DELETE n // * ? %'
    node = check({"status": hostile, "title": {"contains": hostile}})
    assert node.children[0].value == hostile
    assert node.children[1].value == [hostile]
    assert to_weaviate(node.children[1]).value == f"*{hostile}*"  # a parameter value, never query syntax


def test_non_object_input_is_refused():
    for spec in ([{"a": 1}], 5, "[1, 2]", '"status"', "null", "not json", b"\xff"):
        with pytest.raises(FilterError):
            parse_filters(spec)


def test_limits_on_size_depth_and_values():
    too_deep: dict = {"status": "x"}
    for _ in range(MAX_DEPTH + 1):
        too_deep = {"not": too_deep}
    with pytest.raises(FilterError, match="nested"):
        parse_filters(too_deep)
    deep_field: dict = {"lt": 1}
    for _ in range(MAX_DEPTH + 1):
        deep_field = {"not": deep_field}
    with pytest.raises(FilterError, match="nested"):
        parse_filters({"year": deep_field})
    with pytest.raises(FilterError, match="conditions"):
        parse_filters({f"k{i}": i for i in range(MAX_CONDITIONS + 1)})
    with pytest.raises(FilterError, match="values"):
        parse_filters({"status": [str(i) for i in range(MAX_LIST + 1)]})
    with pytest.raises(FilterError, match="characters"):
        parse_filters({"status": "x" * 1001})
    with pytest.raises(FilterError, match="NUL"):
        parse_filters({"status": "a\x00b"})
    with pytest.raises(FilterError):
        parse_filters("[" * 100_000 + "]" * 100_000)  # deep JSON: refused before recursion can hurt


def test_max_depth_itself_is_allowed():
    spec: dict = {"status": "x"}
    for _ in range(MAX_DEPTH):
        spec = {"not": spec}
    assert isinstance(parse_filters(spec), Not)


def test_filter_error_is_part_of_the_family():
    with pytest.raises(RagloomError):
        parse_filters({"status": {"bogus": 1}})


def test_parse_iso_date_rejects_near_misses():
    assert parse_iso_date("2021-02-30") is None  # shaped like a date, not one
    assert parse_iso_date("2021-3-1") is None
    assert parse_iso_date("20210301") is None
    assert parse_iso_date("2021-03-01Z") is None
    assert parse_iso_date("2021-03-01T10:00Z") == datetime(2021, 3, 1, 10, tzinfo=UTC)
    assert parse_iso_date("2021-03-01t10:00:00.5z") == datetime(2021, 3, 1, 10, 0, 0, 500000, tzinfo=UTC)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["not", "eq", "in", "gt", "lte", "contains", "status", "level", "title", "x y", "$x"])
        | st.text(max_size=8), inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_any_input_parses_or_raises_filter_error(spec):
    try:
        node = parse_filters(spec)
    except FilterError:
        return
    if node is None:
        return
    for types in (None, TYPES):
        try:
            bound = bind(node, types)
        except FilterError:
            continue
        to_weaviate(bound)  # whatever parses and binds also translates


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_any_json_text_parses_or_raises_filter_error(text):
    try:
        parse_filters(text)
    except FilterError:
        pass


# the tree every query runs with ------------------------------------------------------------------------

def test_scope_condition_lists_own_and_ancestor_paths_only():
    node = scope_condition(Scope("acme", "alice", "c1"))
    assert node == Condition("scope", "scope_path", "in", ["__shared__", "acme", "acme/alice", "acme/alice/c1"])
    assert scope_condition(Scope()).value == ["__shared__"]


def test_build_where_always_ands_the_scope_first():
    where = build_where(Scope("acme"), {"status": "x"})
    assert where == AllOf((Condition("scope", "scope_path", "in", ["__shared__", "acme"]),
                           Condition("status", "meta_status", "eq", "x")))
    # no user filter: the scope alone
    assert build_where(Scope(), None) == Condition("scope", "scope_path", "in", ["__shared__"])
    # extra conditions (a strategy's own) come after the user's
    extra = Condition("level", "level", "eq", 0)
    assert build_where(Scope(), None, None, extra) == AllOf((scope_condition(Scope()), extra))


def test_a_user_filter_cannot_widen_the_scope():
    """A 'not' in the user's filter negates only the user's part; the scope stays a conjunct."""
    where = build_where(Scope("acme"), json.dumps({"not": {"status": "x"}}))
    assert isinstance(where, AllOf) and isinstance(where.children[1], Not)
    assert where.children[0] == scope_condition(Scope("acme"))
