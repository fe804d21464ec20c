"""The metadata layout (ragloom.metadata): declared keys typed, every other key text, caps; no value ever
decides a type, so one writer's metadata cannot change what another's becomes (no server)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.errors import ConfigError
from ragloom.filters import Condition, as_text, bind
from ragloom.metadata import DECLARED_TYPES, UNDECLARED, MetadataError, MetadataLayout
from ragloom.settings import Settings, parse_metadata_types


def test_undeclared_keys_are_text_whatever_the_value():
    layout = MetadataLayout()
    assert layout.prepare({"priority": 1}) == {"meta_priority": ["1"]}
    assert layout.prepare({"priority": "high"}) == {"meta_priority": ["high"]}
    assert layout.prepare({"flag": True, "tags": ["a", 2], "when": "2024-01-05", "n": {"x": 1.5}}) == {
        "meta_flag": ["true"], "meta_tags": ["a", "2"], "meta_when": ["2024-01-05"], "meta_n_x": ["1.5"]}
    assert layout.prepare({"gone": None, "empty": [], "title": "core", "source_path": "core"}) == {}
    assert layout.type_of("meta_priority") == UNDECLARED


def test_declared_keys_keep_their_types_and_refuse_values_they_cannot_hold():
    layout = MetadataLayout(declared={"year": "INT"})
    assert layout.prepare({"author": "Ann", "created": "2024-01-05", "year": 2020, "to": "bob"}) == {
        "meta_author": "Ann", "meta_created": datetime(2024, 1, 5, tzinfo=UTC), "meta_year": 2020,
        "meta_to": ["bob"]}
    with pytest.raises(MetadataError, match=r"metadata 'year': 'abc' is not a whole number; 'year' is declared INT"):
        layout.prepare({"year": "abc"})
    with pytest.raises(MetadataError, match=r"metadata 'created': 'last week' is not an ISO 8601 date"):
        layout.prepare({"created": "last week"})
    with pytest.raises(MetadataError, match="'author': .* is not a single value"):
        layout.prepare({"author": ["a", "b"]})


def test_caps_are_the_writers_errors():
    layout = MetadataLayout(max_keys=3, max_key_chars=10, max_value_chars=8)
    layout.prepare({"a": 1, "b": 2, "c": 3, "dynamic": True, "page": 2})  # ragloom's own keys do not count
    with pytest.raises(MetadataError, match="4 keys, over the limit of 3 per item"):
        layout.prepare({"a": 1, "b": 2, "c": 3, "d": {"e": 4}})
    with pytest.raises(MetadataError, match="'abcdefghijk'...: 11 characters"):
        layout.prepare({"abcdefghijk": 1})
    with pytest.raises(MetadataError, match="'a': a value of 9 characters"):
        layout.prepare({"a": "x" * 9})
    with pytest.raises(MetadataError, match="'a': a value of 10 characters"):
        layout.prepare({"a": ["xxxxx", "yyyyy"]})


def test_declarations_from_settings():
    assert parse_metadata_types(" year:int , published:DATE,") == {"year": "INT", "published": "DATE"}
    for bad in ("year", "year:LONG", ":INT"):
        with pytest.raises(ConfigError, match="RAGLOOM_METADATA_TYPES"):
            parse_metadata_types(bad)
    with pytest.raises(ConfigError, match="core fields"):
        MetadataLayout(declared={"title": "TEXT"})
    with pytest.raises(ConfigError, match="ragloom's own"):
        MetadataLayout(declared={"expires_at": "TEXT"})
    layout = MetadataLayout.from_settings(Settings(metadata_types="year:INT,author:TEXT_ARRAY"))
    assert layout.type_of("meta_year") == "INT" and layout.type_of("meta_author") == "TEXT_ARRAY"
    assert set(layout.property_types) == {f"meta_{k}" for k in {*DECLARED_TYPES, "year"}}


scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True),
                    st.text(max_size=12), st.sampled_from(["2024-01-05", "high", "1"]))
values = st.one_of(scalars, st.lists(scalars, max_size=3))
keys = st.sampled_from(["priority", "year", "status", "tags", "when", "Review Status"])


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, values, max_size=4))
def test_every_undeclared_value_is_stored_and_found_by_its_own_equality_filter(metadata):
    """Any metadata is accepted with the same types, so no writer's value can refuse another's; and a filter
    with the value a writer gave finds what was stored (``as_text`` on both sides)."""
    layout = MetadataLayout()
    stored = layout.prepare(metadata)
    assert all(layout.type_of(p) == UNDECLARED and isinstance(v, list) for p, v in stored.items())
    for key, value in metadata.items():
        scalar = value[0] if isinstance(value, list) and value else value
        prop = "meta_" + key.lower().replace(" ", "_")
        if scalar is None or isinstance(scalar, float) and not math.isfinite(scalar) or prop not in stored:
            continue
        bound = bind(Condition(key, prop, "eq", scalar), {prop: UNDECLARED})
        assert bound.value == as_text(scalar) and bound.value in stored[prop]
