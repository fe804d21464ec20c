"""graph_rag's traversal controls and its context item, on graphs small enough to solve by hand: a hop bound on
the walk, a filter on the edges walked, the paths that explain the returned chunks, and the context formats."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import dijkstra

from ragloom.errors import ConfigError, QueryError
from ragloom.query import parse_query
from ragloom.retrieval import graph_context, ppr
from ragloom.retrieval.graph_index import EdgeWeights, build_graph, relation_filter


def undirected(n: int, edges: list[tuple[int, int, float]]) -> sp.csr_matrix:
    rows = [a for a, b, _ in edges] + [b for a, b, _ in edges]
    cols = [b for a, b, _ in edges] + [a for a, b, _ in edges]
    return sp.csr_matrix(([w for *_, w in edges] * 2, (rows, cols)), shape=(n, n))


def bounded(adjacency: sp.csr_matrix, reset: list[float], hops: int | None) -> np.ndarray:
    transposed, dangling = ppr.transition(adjacency)
    return ppr.bounded_pagerank(transposed, dangling, np.array(reset, dtype=float), max_hops=hops, damping=0.5,
                                max_iter=300, tol=1e-14)


CHAIN = undirected(4, [(0, 1, 1.0), (1, 2, 1.0), (2, 3, 1.0)])


def test_one_hop_keeps_the_walk_on_the_seed_and_its_neighbour():
    # a - b alone: p_a = 1/2 + p_b/2 (b's only edge inside leads back to a), p_b = p_a/2 => 2/3, 1/3
    assert bounded(CHAIN, [1, 0, 0, 0], 1) == pytest.approx([2 / 3, 1 / 3, 0, 0], abs=1e-9)


def test_two_hops_is_the_three_node_chain():
    # a - b - c (d is three edges away): the chain of test_ppr, 7/12, 4/12, 1/12
    assert bounded(CHAIN, [1, 0, 0, 0], 2) == pytest.approx([7 / 12, 4 / 12, 1 / 12, 0], abs=1e-9)


def test_no_bound_and_a_bound_past_the_graph_give_the_plain_walk():
    plain = bounded(CHAIN, [1, 0, 0, 0], None)
    assert plain[3] > 0
    assert bounded(CHAIN, [1, 0, 0, 0], 3) == pytest.approx(plain, abs=1e-12)
    assert bounded(CHAIN, [1, 0, 0, 0], 10) == pytest.approx(plain, abs=1e-12)


def test_hops_count_from_every_seed():
    # seeds a and d, one hop: {a, b} and {c, d}; the b - c edge is inside the set and is walked
    p = bounded(CHAIN, [1, 0, 0, 1], 1)
    assert p.sum() == pytest.approx(1.0) and p[0] == pytest.approx(p[3]) and p[1] == pytest.approx(p[2])


def test_restrict_renormalises_what_stays_and_makes_the_cut_off_dangling():
    star = undirected(4, [(0, 1, 1.0), (0, 2, 3.0), (0, 3, 1.0)])
    transposed, _ = ppr.transition(star)
    sub, dangling, index = ppr.restrict(transposed, np.array([True, True, False, False]))
    assert list(index) == [0, 1] and not dangling.any()
    assert sub.toarray() == pytest.approx(np.array([[0.0, 1.0], [1.0, 0.0]]))  # the centre steps only to 1
    alone, dangling, _ = ppr.restrict(transposed, np.array([False, False, True, True]))
    assert alone.nnz == 0 and dangling.all()  # both leaves' only edge left the set


def test_bounded_walk_refuses_bad_reset_weights():
    transposed, dangling = ppr.transition(CHAIN)
    with pytest.raises(Exception, match="non-negative"):
        ppr.bounded_pagerank(transposed, dangling, np.array([1.0, -1.0, 0, 0]), max_hops=1)


def _team_rows() -> dict:
    """Rafael leads Data Services, which builds HarborSight; Rafael and Bergen co-occur; Ana co-occurs with
    HarborSight. Chunks: t1 (Rafael, Data Services, Bergen), t2 (Data Services, HarborSight), t3 (HarborSight,
    Ana)."""
    ent = [("rafael", "Rafael Moreno", "PERSON"), ("ds", "Data Services", "ORG"), ("hs", "HarborSight", "PRODUCT"),
           ("bergen", "Bergen", "GPE"), ("ana", "Ana", "PERSON")]
    return {
        "chunks": [{"chunk_id": "t1", "scope_path": "", "entity_ids": ["rafael", "ds", "bergen"], "counts": [1, 1, 1]},
                   {"chunk_id": "t2", "scope_path": "", "entity_ids": ["ds", "hs"], "counts": [1, 1]},
                   {"chunk_id": "t3", "scope_path": "", "entity_ids": ["hs", "ana"], "counts": [1, 1]}],
        "entities": [{"entity_id": i, "name": n, "type": t, "norm": n.lower()} for i, n, t in ent],
        "relations": [
            {"source": "rafael", "target": "ds", "type": "LEAD", "chunk_ids": ["t1"], "chunk_weights": [1]},
            {"source": "ds", "target": "rafael", "type": "CO_OCCURS", "chunk_ids": ["t1"], "chunk_weights": [1]},
            {"source": "bergen", "target": "rafael", "type": "CO_OCCURS", "chunk_ids": ["t1"], "chunk_weights": [1]},
            {"source": "ds", "target": "hs", "type": "BUILD", "chunk_ids": ["t2"], "chunk_weights": [1]},
            {"source": "ana", "target": "hs", "type": "CO_OCCURS", "chunk_ids": ["t3"], "chunk_weights": [1]}],
    }


def _walk_from(graph, entity_id: str, **weights):
    walk = graph.walk_matrix(None, EdgeWeights(**weights))
    reset = np.zeros(graph.n_chunks + graph.n_entities)
    reset[graph.n_chunks + graph.entity_ids.index(entity_id)] = 1.0
    return walk, ppr.personalized_pagerank(walk.transposed, walk.dangling, reset, max_iter=300, tol=1e-14)


def _one_edge_rows(kind: str) -> dict:
    # chunks c0, cb, cc mention A, B, C; A - B typed and A - C co-occurring, both stated in c0
    return {"chunks": [{"chunk_id": f"c{x}", "scope_path": "", "entity_ids": [x], "counts": [1]} for x in "0bc"],
            "entities": [{"entity_id": x, "name": x.upper(), "type": "ORG", "norm": x} for x in "0bc"],
            "relations": [{"source": "0", "target": "b", "type": kind, "chunk_ids": ["c0"], "chunk_weights": [1]},
                          {"source": "0", "target": "c", "type": "CO_OCCURS", "chunk_ids": ["c0"],
                           "chunk_weights": [1]}]}


@pytest.mark.parametrize("relations", [("LEAD",), ("svo",), ("lead", "FOUND")])
def test_filter_to_typed_relations_walks_only_them(relations):
    graph = build_graph(_one_edge_rows("LEAD"))
    walk, mass = _walk_from(graph, "0", svo=2.0, cooccurrence=0.5, relations=relations)
    # nodes c0, cb, cc, A, B, C. A's edges: c0 (1), B (1 x svo 2); B's: A (2), cb (1).
    # p_c0 = p_A/6, p_cb = p_B/6, p_B = (2 p_A/3 + p_cb)/2 => p_B = 4 p_A/11,
    # p_A = 1/2 + (p_c0 + 2 p_B/3)/2 = 1/2 + 27 p_A/132 => p_A = 22/35, p_B = 8/35, p_c0 = 11/105, p_cb = 4/105
    assert mass == pytest.approx([11 / 105, 4 / 105, 0, 22 / 35, 8 / 35, 0], abs=1e-9)
    assert list(walk.relation_weight > 0) == [True, False]


def test_filter_to_cooccurrence_walks_only_it():
    graph = build_graph(_one_edge_rows("LEAD"))
    _, mass = _walk_from(graph, "0", svo=2.0, cooccurrence=0.5, relations=("co_occurs",))
    # A's edges: c0 (1), C (0.5); C's: A (0.5), cc (1). p_c0 = p_A/3, p_C = p_A/6 + p_cc/2, p_cc = p_C/3
    # => p_C = p_A/5, p_A = 1/2 + (p_A/3 + p_C/3)/2 = 1/2 + p_A/5 => p_A = 5/8, p_c0 = 5/24, p_C = 1/8, p_cc = 1/24
    assert mass == pytest.approx([5 / 24, 0, 1 / 24, 5 / 8, 0, 1 / 8], abs=1e-9)


def test_a_predicate_the_graph_lacks_leaves_only_the_mentions():
    graph = build_graph(_one_edge_rows("LEAD"))
    # A - c0 alone: p_A = 1/2 + p_c0/2, p_c0 = p_A/2 => 2/3, 1/3
    assert _walk_from(graph, "0", relations=("LED_BY",))[1] == pytest.approx([1 / 3, 0, 0, 2 / 3, 0, 0], abs=1e-9)


def test_relation_filter_reads_families_and_predicates():
    assert relation_filter(["SVO", "cooccurrence", "Synonym"]) == (frozenset({"svo", "co_occurs", "synonym"}),
                                                                   frozenset())
    assert relation_filter(["led by", "own"]) == (frozenset(), frozenset({"LED_BY", "OWN"}))


def test_synonym_edges_are_walked_only_when_the_filter_names_them():
    rows = _one_edge_rows("LEAD")
    rows["synonyms"] = [{"source": "b", "target": "c", "score": 1.0}]
    graph = build_graph(rows)
    assert _walk_from(graph, "0", relations=("LEAD",))[1][5] == 0  # C only through the synonym edge
    assert _walk_from(graph, "0", relations=("LEAD", "synonym"))[1][5] > 0


def test_explanation_follows_the_typed_path_from_the_query_entity_to_the_returned_chunk():
    graph = build_graph(_team_rows())
    walk, mass = _walk_from(graph, "rafael")
    rafael = graph.entity_ids.index("rafael")
    explanation = graph_context.explain(graph, walk, mass, [rafael], ["t3"], max_edges=10)
    assert explanation is not None
    path = explanation.paths[0]
    assert path["chunk_id"] == "t3" and path["entities"] == ["rafael", "ds", "hs"]
    on_path = [(e["source"], e["type"], e["target"], e["chunk_id"]) for e in explanation.edges if e["on_path"]]
    # typed first, each with its chunk; then the co-occurrence that reaches Ana, t3's other entity
    assert on_path == [("rafael", "LEAD", "ds", "t1"), ("ds", "BUILD", "hs", "t2"), ("ana", "CO_OCCURS", "hs", "t3")]
    families = [e["family"] for e in explanation.edges]
    assert families == sorted(families, key=lambda f: f == "co_occurs")  # typed before co-occurrence
    assert {n["entity_id"] for n in explanation.nodes} >= {"rafael", "ds", "hs"}
    hs = next(n for n in explanation.nodes if n["entity_id"] == "hs")
    assert sorted(hs["chunks"]) == ["t2", "t3"] and hs["chunk_count"] == 2
    # the path's probability is the walk's: Rafael -> DS -> HS, each step a transition probability
    step = walk.transposed.T.tocsr()
    n = graph.n_chunks
    ds, hs = graph.entity_ids.index("ds"), graph.entity_ids.index("hs")
    expected = step[n + rafael, n + ds] * step[n + ds, n + hs]
    assert path["probability"] == pytest.approx(expected, rel=1e-6)


def test_the_store_s_row_order_changes_nothing():
    # Parallel extraction writes rows in no fixed order, so two builds of one graph read them in different orders:
    # the indices, the walk and the explanation (two typed relations between one pair: a tie that only an
    # index can break) must come out the same. The old build followed the rows' order and failed this.
    rows = _team_rows()
    rows["relations"].append({"source": "rafael", "target": "ds", "type": "FUND", "chunk_ids": ["t1"],
                              "chunk_weights": [1]})
    reversed_rows = {table: [dict(r, **{k: list(reversed(v)) for k, v in r.items() if isinstance(v, list)})
                             for r in reversed(table_rows)] for table, table_rows in rows.items()}
    built = []
    for source in (rows, reversed_rows):
        graph = build_graph(source)
        walk, mass = _walk_from(graph, "rafael")
        explanation = graph_context.explain(graph, walk, mass, [graph.entity_ids.index("rafael")], ["t3"],
                                            max_edges=10)
        built.append((graph, mass, explanation))
    (a, mass_a, ex_a), (b, mass_b, ex_b) = built
    assert a.entity_ids == b.entity_ids and a.chunk_ids == b.chunk_ids
    assert np.array_equal(a.relation_pairs, b.relation_pairs) and a.relation_types == b.relation_types
    assert np.array_equal(mass_a, mass_b)  # bit for bit: the same sums in the same order
    assert (ex_a.edges, ex_a.nodes, ex_a.paths) == (ex_b.edges, ex_b.nodes, ex_b.paths)
    assert [e["type"] for e in ex_a.edges][:2] == ["FUND", "LEAD"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.sampled_from(["CO_OCCURS", "LEAD", "BUILD"])),
                max_size=30))
def test_relations_between_two_entities_are_those_a_scan_of_every_relation_finds(relations):
    """The explanation's per-step lookup (a binary search in the relations sorted by pair) returns exactly the
    relations, either direction, in ascending order, that comparing every relation's ends would."""
    ids = [f"e{i}" for i in range(6)]
    rows = {"chunks": [{"chunk_id": "c", "scope_path": "", "entity_ids": ids, "counts": [1] * 6}],
            "entities": [{"entity_id": e, "name": e, "type": "ORG", "norm": e} for e in ids],
            "relations": [{"source": ids[a], "target": ids[b], "type": t, "chunk_ids": ["c"], "chunk_weights": [1]}
                          for a, b, t in relations if a != b]}
    graph = build_graph(rows)
    pairs = np.asarray(graph.relation_pairs)
    for u in range(graph.n_entities):
        for v in range(graph.n_entities):
            ends = pairs.reshape(-1, 2)
            scan = np.flatnonzero(((ends[:, 0] == u) & (ends[:, 1] == v)) | ((ends[:, 0] == v) & (ends[:, 1] == u)))
            assert graph.relations_between(u, v).tolist() == scan.tolist(), (u, v)


def test_explanation_is_capped_and_obeys_the_relation_filter():
    graph = build_graph(_team_rows())
    rafael = graph.entity_ids.index("rafael")
    walk, mass = _walk_from(graph, "rafael")
    capped = graph_context.explain(graph, walk, mass, [rafael], ["t3"], max_edges=1)
    assert [e["type"] for e in capped.edges] == ["LEAD"]
    walk, mass = _walk_from(graph, "rafael", relations=("co_occurs",))
    only_co = graph_context.explain(graph, walk, mass, [rafael], ["t2"], max_edges=10)
    assert only_co is not None and [(e["type"], e["chunk_id"]) for e in only_co.edges] == [("CO_OCCURS", "t1")]
    assert graph_context.explain(graph, walk, mass, [rafael], ["t1"], max_edges=0) is None


def test_context_formats_text_json_and_a_registered_serializer():
    graph = build_graph(_team_rows())
    walk, mass = _walk_from(graph, "rafael")
    explanation = graph_context.explain(graph, walk, mass, [graph.entity_ids.index("rafael")], ["t3"], 10)
    text = graph_context.context_item(explanation, "text")
    assert text.text.startswith("Knowledge graph")
    assert "Rafael Moreno (PERSON) -[LEAD]-> Data Services (ORG) [chunk t1]" in text.text.splitlines()
    assert text.metadata["graph"]["edges"] == explanation.edges and text.metadata["typed_edges"] == 2
    as_json = json.loads(graph_context.context_item(explanation, "json").text)
    assert as_json["edges"][0]["type"] == "LEAD" and "chunks" not in as_json["nodes"][0]

    name = "test_arrows"
    graph_context.register_context_serializer(name)(
        lambda ex: "\n".join(f"{e['source']}->{e['target']}" for e in ex.edges))
    try:
        assert graph_context.context_item(explanation, name).text.splitlines()[0] == "rafael->ds"
        with pytest.raises(ConfigError, match="already registered"):
            graph_context.register_context_serializer(name)(lambda ex: "")
        # the one parser knows the registered name at once, and refuses an unknown one
        assert parse_query(text="q", strategy="graph_rag", options={"context_format": name}).options[
            "context_format"] == name
    finally:
        graph_context._SERIALIZERS.pop(name)  # the generated reference lists the built-in formats only
    with pytest.raises(QueryError, match="context_format takes text \\| json"):
        parse_query(text="q", strategy="graph_rag", options={"context_format": "yaml"})


def test_traversal_options_are_checked_by_the_parser():
    query = parse_query(text="q", strategy="graph_rag",
                        option_pairs=["max_hops=2", "relations=LEAD,co_occurs", "context_format=json"])
    assert query.options == {"max_hops": 2, "relations": ("LEAD", "co_occurs"), "context_format": "json"}
    assert parse_query(text="q", strategy="graph_rag", option_pairs=["max_hops=null"]).options["max_hops"] is None
    with pytest.raises(QueryError, match="max_hops"):
        parse_query(text="q", strategy="graph_rag", options={"max_hops": 0})
    with pytest.raises(QueryError, match="relations"):
        parse_query(text="q", strategy="graph_rag", options={"relations": ["x"] * 101})


@settings(max_examples=60, deadline=None)
@given(st.integers(3, 12).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.floats(0.1, 5.0)),
                         min_size=1, max_size=3 * n),
    st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n), st.integers(0, 4))))
def test_bounded_walk_stays_inside_the_neighbourhood_and_keeps_all_its_mass(case):
    n, edges, reset, hops = case
    edges = [(a, b, w) for a, b, w in edges if a != b]
    reset[0] = max(reset[0], 0.5)  # at least one seed
    adjacency = undirected(n, edges)
    transposed, dangling = ppr.transition(adjacency)
    p = ppr.bounded_pagerank(transposed, dangling, np.array(reset), max_hops=hops, max_iter=500, tol=1e-13)
    inside = ppr.neighbourhood(transposed, np.array(reset), hops)
    assert np.all(p[~inside] == 0) and p.sum() == pytest.approx(1.0)
    # every node inside has a path of at most `hops` edges from a seed (breadth-first, by hand)
    near = {i for i, r in enumerate(reset) if r > 0}
    frontier = set(near)
    for _ in range(hops):
        frontier = {b for a, b, _ in edges if a in frontier} | {a for a, b, _ in edges if b in frontier}
        near |= frontier
    assert set(np.flatnonzero(inside)) == near


def test_explanation_in_one_scope_names_nothing_of_another():
    rows = {
        "chunks": [{"chunk_id": "a1", "scope_path": "acme", "entity_ids": ["bergen", "falcon"], "counts": [1, 1]},
                   {"chunk_id": "g1", "scope_path": "globex", "entity_ids": ["bergen", "zephyr"], "counts": [1, 1]}],
        "entities": [{"entity_id": e, "name": e.title(), "type": "ORG", "norm": e} for e in ("bergen", "falcon",
                                                                                           "zephyr")],
        "relations": [{"source": "falcon", "target": "bergen", "type": "HOST", "chunk_ids": ["a1"],
                       "chunk_weights": [1]},
                      {"source": "zephyr", "target": "bergen", "type": "HOST", "chunk_ids": ["g1"],
                       "chunk_weights": [1]}]}
    graph = build_graph(rows)
    walk = graph.walk_matrix(["acme"])
    reset = np.zeros(graph.n_chunks + graph.n_entities)
    reset[graph.n_chunks + graph.entity_ids.index("falcon")] = 1.0
    mass = ppr.personalized_pagerank(walk.transposed, walk.dangling, reset)
    explanation = graph_context.explain(graph, walk, mass, [graph.entity_ids.index("falcon")], ["a1", "g1"], 10)
    text = json.dumps(explanation.as_dict())
    assert "zephyr" not in text.lower() and "g1" not in text
    assert [(e["source"], e["type"], e["target"], e["chunk_id"]) for e in explanation.edges] == [
        ("falcon", "HOST", "bergen", "a1")]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 9).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.floats(0.01, 5.0)), max_size=30),
    st.lists(st.booleans(), min_size=n, max_size=n))))
def test_steps_between_alive_entities_are_those_of_the_diagonal_product(case):
    """The explanation's path search drops the steps into or out of an entity with no mass: the matrix equals
    diag(alive) @ cost @ diag(alive), stores no zero (csgraph would walk one as a free step), and the shortest
    paths over it are the same."""
    n, steps, alive = case
    rows, cols, costs = zip(*steps, strict=True) if steps else ((), (), ())
    cost = sp.csr_matrix((costs, (rows, cols)), shape=(n, n))
    alive = np.array(alive)
    got = graph_context._between_alive(cost, alive)
    keep = sp.diags(alive.astype(np.float64))
    want = (keep @ cost @ keep).tocsr()
    want.eliminate_zeros()
    assert np.array_equal(got.toarray(), want.toarray()) and got.nnz == want.nnz and not (got.data == 0).any()
    sources = [i for i in range(n) if alive[i]][:2]
    if sources:
        assert np.array_equal(dijkstra(got, indices=sources, min_only=True),
                              dijkstra(want, indices=sources, min_only=True))
