"""Post-processing: near-duplicates, abstention, lost-in-the-middle order, context assembly with citations."""

from __future__ import annotations

import numpy as np
import pytest
from vector_helpers import unit

from ragloom.retrieval.postprocess import (
    DEFAULT_DEDUP_THRESHOLD,
    GRAPH_SOURCE,
    assemble_context,
    dense_cosine,
    lost_in_the_middle,
    remove_near_duplicates,
    sufficiency,
)
from ragloom.types import RetrievalResult, RetrievedItem


def item(chunk_id: str, vector=None, dense=None, text: str = "", **metadata) -> RetrievedItem:
    md = dict(metadata)
    if vector is not None:
        md["vector"] = vector
    return RetrievedItem(chunk_id=chunk_id, document_id=f"doc-{chunk_id}", text=text or f"text of {chunk_id}",
                         score=1.0, lane_scores={"dense": dense} if dense is not None else {}, metadata=md)


def test_near_duplicates_keep_the_better_ranked_copy():
    a = item("a", unit(1, 0, 0))
    a2 = item("a2", unit(1, 0.3, 0))  # cosine 0.958 with a
    b = item("b", unit(1, 1, 0))  # cosine 0.707 with a
    kept, removed = remove_near_duplicates([a, a2, b], threshold=0.92)
    assert [i.chunk_id for i in kept] == ["a", "b"]
    assert removed == ["a2"]


def test_near_duplicate_threshold_is_inclusive_and_configurable():
    a, a2 = item("a", unit(1, 0, 0)), item("a2", unit(1, 0.3, 0))
    cos = float(np.dot(unit(1, 0, 0), unit(1, 0.3, 0)))
    assert remove_near_duplicates([a, a2], threshold=cos - 1e-6)[1] == ["a2"]
    assert remove_near_duplicates([a, a2], threshold=0.99)[1] == []


def test_near_duplicates_match_the_pairwise_rule_on_random_vectors():
    """An item goes when its cosine with any better-ranked *kept* item reaches the threshold (a removed item
    removes nothing): checked against the rule written out pair by pair, with items without a vector between."""
    rng = np.random.default_rng(3)
    for trial in range(30):
        base = rng.normal(size=(4, 8)).astype(np.float32)
        # near copies of a few base vectors, so that some pairs pass any threshold
        vectors = [base[rng.integers(4)] + rng.normal(scale=0.3, size=8).astype(np.float32) for _ in range(12)]
        items = [item(f"c{i}", v.tolist()) if i % 5 != 4 else item(f"c{i}") for i, v in enumerate(vectors)]
        threshold = float(rng.uniform(0.8, 0.99))
        expected_kept, kept_units = [], []
        for it in items:
            v = it.metadata.get("vector")
            if v is not None:
                u = np.asarray(v, dtype=np.float32) / np.linalg.norm(np.asarray(v, dtype=np.float32))
                if any(float(k @ u) >= threshold for k in kept_units):
                    continue
                kept_units.append(u)
            expected_kept.append(it.chunk_id)
        kept, removed = remove_near_duplicates(items, threshold)
        assert [i.chunk_id for i in kept] == expected_kept, trial
        assert removed == [i.chunk_id for i in items if i.chunk_id not in expected_kept]


RULE = ("{n} A Captive Insurer must keep accounting records that show the assets, liabilities, revenues and expenses "
        "of its {what}, and must keep them for at least six years.")


def test_the_default_threshold_drops_copies_and_keeps_parallel_rules():
    """Two rules that differ in what they govern embed at cosine ~0.95 with the default model; the old default
    (0.92) dropped the second one as a duplicate. A copy that differs only in spacing and line breaks is dropped."""
    from ragloom.embedding import make_embedder

    long_term = RULE.format(n="8.3.4", what="Long-Term Insurance Fund")
    texts = [long_term, RULE.format(n="8.3.5", what="reinsurance business"),
             long_term.replace(" A Captive", "  A Captive").replace(", and must", ",\nand must")]
    vectors = make_embedder().encode(texts)
    cosines = [float(np.dot(vectors[0], v) / np.linalg.norm(vectors[0]) / np.linalg.norm(v)) for v in vectors[1:]]
    assert 0.92 < cosines[0] < DEFAULT_DEDUP_THRESHOLD <= cosines[1]  # the case this test is about
    items = [item(f"r{i}", vector=v, text=t) for i, (t, v) in enumerate(zip(texts, vectors, strict=True))]
    kept, removed = remove_near_duplicates(items)
    assert [i.chunk_id for i in kept] == ["r0", "r1"] and removed == ["r2"]


def test_items_without_vectors_are_never_dropped():
    kept, removed = remove_near_duplicates([item("g"), item("a", unit(1, 0)), item("h"), item("b", unit(1, 0))])
    assert [i.chunk_id for i in kept] == ["g", "a", "h"] and removed == ["b"]


def test_dense_cosine_prefers_the_lane_score_then_the_vector():
    q = np.asarray(unit(1, 0), dtype=np.float32)
    assert dense_cosine(item("a", unit(0, 1), dense=0.42), q) == pytest.approx(0.42)
    assert dense_cosine(item("a", unit(1, 1)), q) == pytest.approx(0.7071, abs=1e-4)
    assert dense_cosine(item("a"), q) is None
    assert dense_cosine(item("a", unit(1, 1)), None) is None


def test_sufficiency_abstains_below_the_floor_and_says_why():
    q = np.asarray(unit(1, 0), dtype=np.float32)
    best, reason = sufficiency([item("a", dense=0.21), item("b", dense=0.18)], q, floor=0.3)
    assert best == pytest.approx(0.21)
    assert "0.210" in reason and "0.30" in reason
    best, reason = sufficiency([item("a", dense=0.21), item("b", unit(1, 0.1))], q, floor=0.3)
    assert best > 0.99 and reason is None


def test_sufficiency_ignores_the_graph_item_and_never_abstains_without_a_measure():
    q = np.asarray(unit(1, 0), dtype=np.float32)
    graph = item("graph:1", unit(1, 0), source=GRAPH_SOURCE)
    assert sufficiency([graph, item("a", dense=0.1)], q, floor=0.3)[1] is not None
    assert sufficiency([item("a")], q, floor=0.3) == (None, None)
    assert sufficiency([], q, floor=0.3) == (None, "no results")


@pytest.mark.parametrize("n", range(0, 8))
def test_lost_in_the_middle_puts_the_best_at_both_ends(n):
    items = [item(str(i)) for i in range(1, n + 1)]
    out = [int(i.chunk_id) for i in lost_in_the_middle(items)]
    assert sorted(out) == list(range(1, n + 1))
    if n >= 2:
        assert out[0] == 1 and out[-1] == 2
    if n >= 4:
        assert out[1] == 3 and out[-2] == 4
        middle = out[len(out) // 2]
        assert middle >= n - 1  # the weakest sit in the middle


def count_words(text: str) -> int:
    return len(text.split())


def test_assemble_context_numbers_passages_and_maps_citations():
    items = [item("c1", text="alpha beta gamma", title="Doc one", source_path="a.md", start=0, end=16),
             RetrievedItem(chunk_id="c2", document_id="d2", text="delta epsilon", score=0.5,
                           heading_path=["Guide", "Setup"], metadata={"title": "Doc two"})]
    text, citations = assemble_context(RetrievalResult("q", items), token_budget=100, count_tokens=count_words)
    assert text == "[1] Doc one\nalpha beta gamma\n\n[2] Guide > Setup\ndelta epsilon"
    assert [(c.number, c.chunk_id, c.document_id) for c in citations] == [(1, "c1", "doc-c1"), (2, "c2", "d2")]
    assert citations[0].source_path == "a.md" and (citations[0].start, citations[0].end) == (0, 16)
    assert citations[1].heading_path == ("Guide", "Setup")


def test_assemble_context_respects_the_budget_and_skips_what_does_not_fit():
    long = item("long", text=" ".join(["w"] * 50), title="L")
    short = item("short", text="tiny text", title="S")
    first = item("first", text="one two three", title="F")
    text, citations = assemble_context([first, long, short], token_budget=12, count_tokens=count_words)
    assert [c.chunk_id for c in citations] == ["first", "short"]
    assert [c.number for c in citations] == [1, 2]  # contiguous after a skip
    assert "[2] S" in text
    used = sum(count_words(block) for block in text.split("\n\n")) + 2 * (len(citations) - 1)
    assert used <= 12


def test_assemble_context_with_nothing_that_fits():
    assert assemble_context([item("a", text="x " * 20)], token_budget=3, count_tokens=count_words) == ("", [])


def test_assemble_context_defaults_to_the_model_tokenizer():
    text, citations = assemble_context([item("a", text="A sentence about enzymes.", title="T")], token_budget=50)
    assert len(citations) == 1 and text.startswith("[1] T\n")


# auto-merge (a pure helper of hierarchical; the graph context item: test_graph_walk.py) -------------------------

def _span(chunk_id: str, start: int, end: int, parent: str | None, level: int) -> RetrievedItem:
    return RetrievedItem(chunk_id=chunk_id, document_id="d", text=chunk_id, score=0.0,
                         metadata={"start": start, "end": end, "parent_id": parent, "level": level})


def test_auto_merge_replaces_siblings_covering_enough_of_their_parent():
    from ragloom.retrieval.hierarchical import auto_merge

    parents = {2: {"p1": _span("p1", 0, 100, "s1", 2), "p2": _span("p2", 100, 200, "s1", 2)},
               1: {"s1": _span("s1", 0, 200, None, 1)}}
    hits = [_span("a", 0, 30, "p1", 3), _span("x", 100, 140, "p2", 3), _span("b", 30, 60, "p1", 3),
            _span("y", 140, 150, "p2", 3)]
    for rank, hit in enumerate(hits):
        hit.score = 1.0 - rank / 10
    merged = auto_merge(hits, parents, leaf=3, threshold=0.55)
    assert [i.chunk_id for i in merged] == ["p1", "x", "y"]  # a + b cover 60% of p1, x + y 50% of p2
    assert merged[0].metadata["merged_from"] == ["a", "b"] and merged[0].score == 1.0
    assert [i.chunk_id for i in auto_merge(hits, parents, leaf=3, threshold=0.7)] == ["a", "x", "b", "y"]
    # at 0.5 both parents merge, and then they cover all of their own parent: merging goes on up
    cascade = auto_merge(hits, parents, leaf=3, threshold=0.5)
    assert [i.chunk_id for i in cascade] == ["s1"] and cascade[0].metadata["merged_from"] == ["p1", "p2"]
    single = [_span("a", 0, 90, "p1", 3)]  # one child never merges, however much it covers
    assert auto_merge(single, parents, leaf=3, threshold=0.5)[0].chunk_id == "a"
