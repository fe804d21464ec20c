"""Fusion over ranked lists: RRF and weighted min-max, per-lane scores kept, inputs untouched."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.errors import RetrievalError
from ragloom.retrieval.fusion import fuse, rrf, weighted
from ragloom.types import RetrievedItem


def item(chunk_id: str, score: float, lane: str | None = None) -> RetrievedItem:
    return RetrievedItem(chunk_id=chunk_id, document_id=f"doc-{chunk_id}", text=chunk_id, score=score,
                         lane_scores={lane: score} if lane else {}, metadata={"lane": lane})


def test_rrf_scores_are_reciprocal_ranks_summed():
    dense = [item("a", 0.9, "dense"), item("b", 0.8, "dense"), item("c", 0.7, "dense")]
    bm25 = [item("c", 12.0, "bm25"), item("a", 9.0, "bm25")]
    fused = rrf({"dense": dense, "bm25": bm25}, rrf_k=60)
    scores = {i.chunk_id: i.score for i in fused}
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert scores["b"] == pytest.approx(1 / 62)
    assert [i.chunk_id for i in fused] == ["a", "c", "b"]
    assert [i.rank for i in fused] == [1, 2, 3]


def test_fused_items_keep_every_lane_score():
    dense = [item("a", 0.9, "dense")]
    bm25 = [item("a", 12.0, "bm25")]
    (a,) = rrf({"dense": dense, "bm25": bm25})
    assert a.lane_scores == {"dense": 0.9, "bm25": 12.0}


def test_lane_name_is_added_when_items_carry_no_lane_scores():
    (a,) = rrf({"graph": [item("a", 3.0)]})
    assert a.lane_scores == {"graph": 3.0}


def test_inputs_are_not_modified():
    lists = {"dense": [item("a", 0.9, "dense"), item("b", 0.5, "dense")], "bm25": [item("b", 3.0, "bm25")]}
    before = copy.deepcopy(lists)
    rrf(lists)
    weighted(lists)
    assert lists == before


def test_rrf_weights_and_k():
    dense = [item("a", 0.9), item("b", 0.8)]
    graph = [item("b", 5.0), item("a", 1.0)]
    fused = rrf({"dense": dense, "graph": graph}, weights={"graph": 3.0})
    assert fused[0].chunk_id == "b"
    assert len(rrf({"dense": dense, "graph": graph}, k=1)) == 1
    with pytest.raises(RetrievalError):
        rrf({"dense": dense}, weights={"dense": -1})
    with pytest.raises(RetrievalError):
        rrf({"dense": dense}, rrf_k=-1)


def test_rrf_small_k_sharpens_the_head():
    # with rrf_k=0 rank 1 in one lane (1.0) beats ranks 2 and 3 (0.5 + 0.33);
    # with rrf_k=60 being near the top everywhere wins clearly
    one = [item("top", 1.0), item("both", 0.9)]
    two = [item("other", 1.0), item("next", 0.95), item("both", 0.9)]
    assert rrf({"one": one, "two": two}, rrf_k=60)[0].chunk_id == "both"
    head = [i.chunk_id for i in rrf({"one": one, "two": two}, rrf_k=0)]
    assert head[:2] == ["other", "top"] and head.index("both") == 2  # the two rank-1s tie: by id


def test_weighted_min_max_normalizes_each_lane():
    dense = [item("a", 0.9), item("b", 0.6), item("c", 0.3)]  # -> 1, 0.5, 0
    bm25 = [item("c", 30.0), item("b", 20.0), item("a", 10.0)]  # -> 1, 0.5, 0
    fused = weighted({"dense": dense, "bm25": bm25}, weights={"dense": 2.0})
    scores = {i.chunk_id: i.score for i in fused}
    assert scores == pytest.approx({"a": 2.0, "b": 1.5, "c": 1.0})
    assert [i.chunk_id for i in fused] == ["a", "b", "c"]


def test_weighted_constant_lane_counts_one_and_missing_counts_zero():
    fused = weighted({"x": [item("a", 5.0), item("b", 5.0)], "y": [item("c", 1.0)]})
    assert {i.chunk_id: i.score for i in fused} == {"a": 1.0, "b": 1.0, "c": 1.0}


def test_duplicate_in_one_lane_counts_its_best_rank_once():
    fused = rrf({"x": [item("a", 1.0), item("a", 0.5), item("b", 0.4)]}, rrf_k=0)
    assert {i.chunk_id: i.score for i in fused} == {"a": 1.0, "b": pytest.approx(1 / 3)}


def test_fuse_by_name():
    lists = {"x": [item("a", 1.0)]}
    assert fuse(lists, "rrf")[0].score == pytest.approx(1 / 61)
    assert fuse(lists, "weighted")[0].score == 1.0
    with pytest.raises(RetrievalError, match="unknown fusion"):
        fuse(lists, "borda")


def test_empty_input():
    assert rrf({}) == []
    assert weighted({"x": []}) == []


lanes = st.dictionaries(
    st.sampled_from(["dense", "bm25", "graph"]),
    st.lists(st.tuples(st.sampled_from("abcdefgh"), st.floats(-5, 5)), max_size=8),
    max_size=3,
)


@settings(max_examples=200, deadline=None)
@given(lanes, st.integers(0, 100))
def test_rrf_invariants(raw, rrf_k):
    lists = {lane: [item(c, s) for c, s in entries] for lane, entries in raw.items()}
    fused = rrf(lists, rrf_k=rrf_k)
    ids = [i.chunk_id for i in fused]
    assert sorted(ids) == sorted({c for entries in raw.values() for c, _ in entries})  # union, once each
    assert all(a.score >= b.score for a, b in zip(fused, fused[1:], strict=False))  # best first
    assert [i.rank for i in fused] == list(range(1, len(fused) + 1))
    for i in fused:
        assert set(i.lane_scores) == {lane for lane, entries in raw.items() if any(c == i.chunk_id for c, _ in entries)}


@settings(max_examples=200, deadline=None)
@given(lanes)
def test_weighted_scores_are_bounded_by_the_number_of_lanes(raw):
    lists = {lane: [item(c, s) for c, s in entries] for lane, entries in raw.items()}
    for i in weighted(lists):
        assert 0.0 <= i.score <= len(lists) + 1e-9
