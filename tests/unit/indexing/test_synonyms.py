"""Synonym pairs: cosine kNN of new entity names against all embedded ones, thresholded, one edge per pair."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.errors import ConfigError
from ragloom.extraction.resolution import contrasting_names
from ragloom.indexing.synonyms import SynonymParams, synonym_pairs


def unit(*rows: list[float]) -> np.ndarray:
    m = np.array(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def angle(deg: float) -> list[float]:
    return [float(np.cos(np.radians(deg))), float(np.sin(np.radians(deg)))]


NONE = np.zeros((0, 2), dtype=np.float32)


def test_threshold_and_hand_computed_scores():
    # cos 30 deg = 0.866, cos 60 deg = 0.5: with threshold 0.8 only names 30 degrees apart link.
    new = unit(angle(0), angle(30), angle(60))
    pairs = synonym_pairs(["a", "b", "c"], new, ["thing"] * 3, [], NONE, [], SynonymParams(threshold=0.8))
    assert [(a, b) for a, b, _ in pairs] == [("a", "b"), ("b", "c")]
    assert pairs[0][2] == pytest.approx(np.cos(np.radians(30)), abs=1e-6)


def test_new_entities_link_to_old_ones_but_old_pairs_are_never_recomputed():
    old = unit(angle(0), angle(5))  # "o1"-"o2" are close, but both old: not this call's business
    new = unit(angle(10))
    pairs = synonym_pairs(["n"], new, ["thing"], ["o1", "o2"], old, ["thing", "thing"], SynonymParams(threshold=0.9))
    assert [(a, b) for a, b, _ in pairs] == [("n", "o1"), ("n", "o2")]


def test_one_edge_per_pair_from_the_smaller_id():
    new = unit(angle(0), angle(1))
    pairs = synonym_pairs(["z", "a"], new, ["thing", "thing"], [], NONE, [], SynonymParams(threshold=0.5))
    assert len(pairs) == 1 and pairs[0][:2] == ("a", "z")


def test_neighbours_caps_the_links_a_new_entity_makes():
    old = unit(*[angle(d) for d in (1, 2, 3, 4, 5)])
    old_ids = [f"o{d}" for d in range(5)]
    pairs = synonym_pairs(["n"], unit(angle(0)), ["thing"], old_ids, old, ["thing"] * 5,
                          SynonymParams(threshold=0.5, neighbours=2))
    assert [(a, b) for a, b, _ in pairs] == [("n", "o0"), ("n", "o1")]  # the two nearest
    assert synonym_pairs(["n"], unit(angle(0)), ["thing"], old_ids, old, ["thing"] * 5,
                         SynonymParams(neighbours=0)) == []


def test_rows_with_more_neighbours_than_the_cap_keep_their_nearest_and_the_others_keep_all():
    # "n1" has four old entities above the threshold and keeps its two nearest; "n2" (far from n1) has
    # exactly two and keeps both; "n3" has none.
    old = unit(*[angle(d) for d in (1, 2, 3, 4, 90, 92)])
    old_ids = ["o1", "o2", "o3", "o4", "p1", "p2"]
    new = unit(angle(0), angle(91), angle(180))
    pairs = synonym_pairs(["n1", "n2", "n3"], new, ["thing"] * 3, old_ids, old, ["thing"] * 6,
                          SynonymParams(threshold=0.99, neighbours=2))
    assert [(a, b) for a, b, _ in pairs] == [("n1", "o1"), ("n1", "o2"), ("n2", "p1"), ("n2", "p2")]


def test_different_kinds_never_link_even_with_the_same_name():
    same = unit(angle(0), angle(0))
    assert synonym_pairs(["washington-person", "washington-place"], same, ["person", "thing"], [], NONE, [],
                         SynonymParams()) == []


def test_params_are_checked():
    for bad in ({"threshold": 0.0}, {"threshold": 1.5}, {"neighbours": -1}):
        with pytest.raises(ConfigError):
            SynonymParams(**bad)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(0, 12), st.floats(0.1, 0.99), st.integers(1, 4), st.integers(0, 2**31))
def test_pairs_match_brute_force(n_new, n_old, threshold, neighbours, seed):
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n_old + n_new, 4)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    kinds = [["thing", "person"][i] for i in rng.integers(0, 2, n_old + n_new)]
    ids = [f"e{i:02d}" for i in range(n_old + n_new)]
    params = SynonymParams(threshold=threshold, neighbours=neighbours)
    got = synonym_pairs(ids[n_old:], vectors[n_old:], kinds[n_old:], ids[:n_old], vectors[:n_old], kinds[:n_old],
                        params)
    expected: dict[tuple[str, str], float] = {}
    for i in range(n_old, n_old + n_new):
        others = sorted((j for j in range(n_old + n_new) if j != i and kinds[j] == kinds[i]),
                        key=lambda j: -float(vectors[i] @ vectors[j]))
        for j in others[:neighbours]:
            score = float(vectors[i] @ vectors[j])
            if score >= threshold:
                expected[tuple(sorted((ids[i], ids[j])))] = score
    assert {(a, b) for a, b, _ in got} == set(expected)
    for a, b, score in got:
        assert a < b and score == pytest.approx(expected[(a, b)], abs=1e-5)


@pytest.mark.parametrize(("a", "b", "contrast"), [
    ("35th Chess Olympiad", "36th Chess Olympiad", True),  # MuSiQue, cosine 0.959 with MiniLM
    ("Southern Netherlands", "Northern Netherlands", True),  # 0.891
    ("Henry III", "Henry VIII", True),
    ("2006 Census Bureau", "Census Bureau", True),
    ("Nelson Mandela", "Mandela", False),  # 0.960: one person
    ("U.S. Supreme Court", "United States Supreme Court", False),
    ("New York", "New York City", False),
    ("Louis XIV", "Louis XV", True),
    ("American Civil War", "American War", False),  # "civil" is no numeral
    ("George C. Marshall", "George Marshall", False),  # nor is an initial
])
def test_contrasting_names(a, b, contrast):
    assert contrasting_names(a, b) == contrast


def test_contrasting_names_are_never_linked():
    same = unit(angle(0), angle(1), angle(2))
    names = {"a": "35th Chess Olympiad", "b": "36th Chess Olympiad", "c": "Chess Olympiad"}
    pairs = synonym_pairs(["a", "b", "c"], same, ["thing"] * 3, [], NONE, [], SynonymParams(), names)
    assert pairs == [] and len(synonym_pairs(["a", "b", "c"], same, ["thing"] * 3, [], NONE, [], SynonymParams())) == 3
