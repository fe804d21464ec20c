"""graph_rag's gate and cap on the walk: when it answers, and how far it may move the lane's order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragloom.retrieval.walk_gate import GateThresholds, WalkSignals, average_overlap, combine, should_walk, walk_signals


def ids(lane, walk, head, slots, k=10):
    return combine(lane, walk, head, slots, k, key=lambda x: x)


def test_head_then_walk_then_lane():
    lane = ["a", "b", "c", "d", "e", "f"]
    walk = ["x", "c", "y", "a", "z"]
    assert ids(lane, walk, 2, None) == ["a", "b", "x", "c", "y", "z", "d", "e", "f"]


def test_walk_slots_bound_what_the_walk_places():
    lane = ["a", "b", "c", "d", "e", "f"]
    walk = ["x", "c", "y", "z"]
    assert ids(lane, walk, 2, 1) == ["a", "b", "x", "c", "d", "e", "f"]
    assert ids(lane, walk, 2, 2) == ["a", "b", "x", "c", "d", "e", "f"]  # c was the lane's next anyway
    assert ids(lane, walk, 2, 3) == ["a", "b", "x", "c", "y", "d", "e", "f"]
    assert ids(lane, walk, 0, 0) == lane  # no slot: the lane's order


def test_cut_to_k():
    assert ids(["a", "b", "c"], ["x", "y", "z"], 1, None, k=3) == ["a", "x", "y"]


@given(st.lists(st.integers(0, 30), unique=True, max_size=20), st.lists(st.integers(0, 30), unique=True, max_size=20),
       st.integers(0, 25), st.one_of(st.none(), st.integers(0, 25)), st.integers(1, 40))
def test_combine_invariants(lane, walk, head, slots, k):
    out = ids(lane, walk, head, slots, k)
    assert len(out) == len(set(out)) <= k
    assert set(out) <= set(lane) | set(walk)
    assert out[: min(head, len(lane), k)] == lane[: min(head, len(lane), k)]
    from_walk = [x for x in out[min(head, len(lane)):] if x not in lane]
    assert slots is None or len(from_walk) <= slots
    # nothing the lane returned is lost while there is room
    if len(out) < k:
        assert set(lane) <= set(out)
    # chunks after the walk's slots keep the lane's relative order
    lane_part = [x for x in out if x in lane and x not in walk]
    assert lane_part == [x for x in lane if x in lane_part]


def test_signals_read_the_lane_and_the_walk():
    s = walk_signals(2, [0.8, 0.6, 0.1], ["a", "b", "c"], ["a", "x", "b", "y"], [0.5, 0.3, 0.1, 0.1])
    # depths 1..10 against lane a, b, c: 1/1, 1/2, 2/3, then 2/4 .. 2/10 (the walk's x, y are never in it)
    ao = (1 + 1 / 2 + 2 / 3 + sum(2 / d for d in range(4, 11))) / 10
    assert s == WalkSignals(named=2, lane_top=0.8, lane_margin=pytest.approx(0.25), overlap=0.5,
                            concentration=pytest.approx(0.5), average_overlap=pytest.approx(ao))


def test_signals_of_empty_orders():
    s = walk_signals(0, [], [], [], [])
    assert (s.lane_top, s.lane_margin, s.overlap, s.concentration, s.average_overlap) == (0.0, 0.0, 1.0, 0.0, 1.0)


@given(st.lists(st.sampled_from("abcdefghijklmn"), max_size=14, unique=True),
       st.lists(st.sampled_from("abcdefghijklmn"), min_size=1, max_size=14, unique=True))
def test_average_overlap_is_the_mean_of_the_overlaps_at_each_depth(lane, walk):
    by_slices = sum(len(set(walk[:d]) & set(lane[:d])) / d for d in range(1, 11)) / 10
    assert average_overlap(lane, walk) == pytest.approx(by_slices)
    if lane:
        assert average_overlap(walk, lane) == pytest.approx(by_slices)  # symmetric
    assert 0.0 <= average_overlap(lane, walk) <= 1.0


def test_one_chunk_moves_average_overlap_less_than_overlap():
    lane = list("abcdefghij")
    walk = list("abcdefghiz")  # the 10th chunk differs: overlap drops by a tenth
    assert walk_signals(0, [], lane, lane, []).overlap - walk_signals(0, [], lane, walk, []).overlap \
        == pytest.approx(0.1)
    assert average_overlap(lane, lane) - average_overlap(lane, walk) == pytest.approx(0.01)


def test_gate_walks_only_when_every_bound_holds():
    s = WalkSignals(named=3, lane_top=0.9, lane_margin=0.2, overlap=0.7, concentration=0.3, average_overlap=0.55)
    assert should_walk(s, GateThresholds())
    assert not should_walk(s, GateThresholds(min_named=4))
    assert should_walk(s, GateThresholds(max_named=3))  # bounds are inclusive
    assert not should_walk(s, GateThresholds(max_named=2))
    assert should_walk(s, GateThresholds(min_overlap=0.7))
    assert not should_walk(s, GateThresholds(min_overlap=0.8))
    assert not should_walk(s, GateThresholds(min_concentration=0.4))
    assert should_walk(s, GateThresholds(min_average_overlap=0.55))
    assert not should_walk(s, GateThresholds(min_average_overlap=0.6))
    assert should_walk({"named": 0, "lane_top": 0.9, "lane_margin": 0.2, "overlap": 1.0, "concentration": 0.3},
                       GateThresholds(min_named=0, max_named=0, min_overlap=1.0))


def test_graph_rag_gate_reads_its_declared_options():
    from ragloom.options import option_defaults
    from ragloom.retrieval.graph_rag import GraphRagRetriever, gate_thresholds

    defaults = option_defaults(GraphRagRetriever.declared_options)
    assert gate_thresholds(defaults) == GateThresholds(min_named=0, max_named=defaults["max_named"],
                                                       min_overlap=defaults["min_overlap"],
                                                       min_average_overlap=defaults["min_average_overlap"])
    assert gate_thresholds({**defaults, "min_average_overlap": 0.55}).min_average_overlap == 0.55
    assert gate_thresholds({**defaults, "require_named": True}).min_named == 1
