"""Declared retrieval options: every strategy's declarations are consistent, the template checks values once
against them (type, choices, range) with errors that name the option and what it takes, and text values
(``--option key=value``) parse by the option's type."""

from __future__ import annotations

import pytest

from ragloom.errors import RetrievalError
from ragloom.options import parse_option_pairs
from ragloom.retrieval import (
    POSTPROCESS_OPTIONS,
    Option,
    RetrievalContext,
    get_retriever,
    strategy_class,
)


@pytest.fixture
def context() -> RetrievalContext:
    return RetrievalContext(vectors=None)  # no store: a value the declarations refuse never reaches one


@pytest.mark.parametrize("name", ["dense", "bm25", "hybrid", "graph_rag", "hierarchical"])
def test_declarations_are_consistent(name):
    cls = strategy_class(name)
    for option_name, option in cls.all_options().items():
        assert option.help and "\n" not in option.help, f"{name}.{option_name} needs one line of help"
        assert option.check(name, option_name, option.default) == option.default  # a default is allowed
        assert option.allowed()
    assert set(POSTPROCESS_OPTIONS) <= set(cls.all_options())


def test_unknown_strategy_name_lists_the_registered_ones():
    with pytest.raises(RetrievalError, match="unknown retrieval strategy 'nope'.*hybrid"):
        strategy_class("nope")


@pytest.mark.parametrize("strategy, options, message", [
    ("hybrid", {"alpha": 1.5}, r"alpha=1\.5 is not allowed; alpha takes number 0 to 1"),
    ("hybrid", {"alpha": True}, "alpha=True"),
    ("hybrid", {"fusion_type": "sum"}, "fusion_type='sum' is not allowed; fusion_type takes relative_score | ranked"),
    ("hybrid", {"fusion": "max"}, "fusion takes rrf | weighted"),
    ("hybrid", {"lanes": ["dense", "dense"]}, "lanes takes a list of dense | bm25 | hybrid"),
    ("hybrid", {"lanes": []}, r"at least 1"),
    ("hybrid", {"lanes": ["sparse"]}, "lanes="),
    ("hybrid", {"lanes": "dense"}, "lanes='dense'"),
    ("hybrid", {"lane_multiplier": 0}, "lane_multiplier takes integer 1 to 20"),
    ("hybrid", {"rrf_k": -1}, "rrf_k takes integer 0 to 10000"),
    ("hybrid", {"weights": [1, 2]}, "weights takes a JSON object of name: number 0 to 100 or null"),
    ("hierarchical", {"merge_threshold": 0.0}, "merge_threshold takes number > 0 and <= 1"),
    ("hierarchical", {"expand": "section"}, "expand takes none | parent | document"),
    ("hierarchical", {"lane": "bm25"}, "lane takes dense | hybrid"),
    ("hierarchical", {"level_top_k": {"section": 0}}, "level_top_k takes a JSON object of name: integer 1 to 200"),
    ("hierarchical", {"level_top_k": [10, 30]}, "level_top_k="),
    ("hierarchical", {"score_threshold": {"child": "high"}}, "score_threshold takes a JSON object of name: any number"),
    ("hierarchical", {"constrain_by": "parent"}, "constrain_by takes none | previous | all"),
    ("hierarchical", {"output_level": "leaf"}, "output_level names 'leaf', not a level of chunking 'hierarchical'; "
                                               "its levels: document | section | parent_1024 | child"),
    ("hierarchical", {"start_level": 1}, "start_level=1"),
    ("hierarchical", {"score_threshold": {"sections": 0.2}}, "score_threshold names 'sections'"),
    ("hierarchical", {"level_top_k": {"paragraph": 5}}, "level_top_k names 'paragraph'"),
    ("graph_rag", {"damping": 1.0}, "damping takes number 0 to 0.99"),
    ("graph_rag", {"vector_lane": "bm25"}, "vector_lane takes dense | hybrid"),
    ("graph_rag", {"graph_order": "random"}, "graph_order takes cosine | graph"),
    ("dense", {"dedup_threshold": 0}, "dedup_threshold takes number > 0 and <= 1"),
    ("dense", {"alpha": 0.5}, "dense: unknown option 'alpha'; options: abstain, abstain_floor"),
])
def test_refused_values_name_the_option_and_what_it_takes(context, strategy, options, message):
    with pytest.raises(RetrievalError, match=message):
        get_retriever(strategy, context, **options)  # at construction: nothing is searched
    retriever = get_retriever(strategy, context)
    with pytest.raises(RetrievalError, match=message):
        retriever.search("q", **options)  # and per search, before any store call


def test_accepted_values_come_back_in_the_options_type(context):
    retriever = get_retriever("hybrid", context, alpha=1, lanes=["bm25", "dense"], weights={"bm25": 2})
    assert retriever.options["alpha"] == 1.0 and isinstance(retriever.options["alpha"], float)
    assert retriever.options["lanes"] == ("bm25", "dense")
    assert retriever.options["weights"] == {"bm25": 2}
    levels = get_retriever("hierarchical", context, level_top_k={"section": 5}, score_threshold={"child": 1},
                           output_level="parent_1024")
    assert levels.options["level_top_k"] == {"section": 5} and levels.options["score_threshold"] == {"child": 1.0}
    assert isinstance(levels.options["score_threshold"]["child"], float)
    assert levels.levels == ("document", "section", "parent_1024", "child")


@pytest.mark.parametrize("pair, expected", [
    ("alpha=0.25", {"alpha": 0.25}),
    ("alpha=1", {"alpha": 1.0}),
    ("dedup=false", {"dedup": False}),
    ("dedup=True", {"dedup": True}),
    ("client_fusion=yes", {"client_fusion": True}),
    ("lanes=dense,bm25", {"lanes": ("dense", "bm25")}),
    ('lanes=["bm25"]', {"lanes": ("bm25",)}),
    ("fusion_type = ranked", {"fusion_type": "ranked"}),
    ('weights={"dense": 2}', {"weights": {"dense": 2}}),
    ("weights=null", {"weights": None}),
    ("rrf_k=10", {"rrf_k": 10}),
])
def test_text_values_parse_by_the_options_type(pair, expected):
    assert parse_option_pairs("hybrid", strategy_class("hybrid").all_options(), [pair]) == expected


@pytest.mark.parametrize("pair, expected", [
    ('score_threshold={"section": 0.3, "child": 1}', {"score_threshold": {"section": 0.3, "child": 1.0}}),
    ("score_threshold=section:0.3, child:0.2", {"score_threshold": {"section": 0.3, "child": 0.2}}),
    ("level_top_k=section:5", {"level_top_k": {"section": 5}}),
    ("output_level=parent_1024", {"output_level": "parent_1024"}),
    ("output_level=null", {"output_level": None}),
    ("constrain_by=previous", {"constrain_by": "previous"}),
])
def test_level_options_parse_from_text(pair, expected):
    assert parse_option_pairs("hierarchical", strategy_class("hierarchical").all_options(), [pair]) == expected


@pytest.mark.parametrize("strategy, pair, message", [
    ("hybrid", "alpha", "should look like key=value"),
    ("hybrid", "=1", "should look like key=value"),
    ("hybrid", "alpha=lots", "alpha='lots' is not allowed"),
    ("hybrid", "rrf_k=1.5", "rrf_k='1.5'"),
    ("hybrid", "dedup=maybe", "dedup='maybe'"),
    ("hybrid", "max_hops=2", "unknown option 'max_hops'"),
    ("hybrid", "weights={bad json", "weights="),
    ("hierarchical", "score_threshold=section=0.3", "score_threshold='section=0.3' is not allowed"),
    ("hierarchical", "score_threshold=section:high", "score_threshold="),
    ("hierarchical", "level_top_k=section:1.5", "level_top_k="),
])
def test_bad_text_values_are_clear_errors(strategy, pair, message):
    with pytest.raises(RetrievalError, match=message):
        parse_option_pairs(strategy, strategy_class(strategy).all_options(), [pair])


def test_option_declaration_itself_is_checked():
    with pytest.raises(RetrievalError, match="kind"):
        Option(object())
    assert Option(None, kind=dict).allowed() == "a JSON object or null"
    assert Option({}, kind=dict, of=float, min=0).allowed() == "a JSON object of name: number >= 0"
    assert Option((), kind=tuple, of=int, min=1).allowed() == "a list of integer >= 1"
    assert Option("x").allowed() == "any text"
