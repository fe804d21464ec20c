"""Personalized PageRank, seed weighting and the in-process retrieval graph, on graphs small enough to solve by hand."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from ragloom.errors import RetrievalError
from ragloom.retrieval import ppr
from ragloom.retrieval.graph_index import EdgeWeights, build_graph


def undirected(n: int, edges: list[tuple[int, int, float]]) -> sp.csr_matrix:
    rows = [a for a, b, _ in edges] + [b for a, b, _ in edges]
    cols = [b for a, b, _ in edges] + [a for a, b, _ in edges]
    vals = [w for *_, w in edges] * 2
    return sp.csr_matrix((vals, (rows, cols)), shape=(n, n))


def rank(adjacency: sp.csr_matrix, reset: list[float], damping: float = 0.5, visible=None) -> np.ndarray:
    transposed, dangling = ppr.transition(adjacency, visible)
    return ppr.personalized_pagerank(transposed, dangling, np.array(reset, dtype=float), damping=damping,
                                     max_iter=200, tol=1e-13)


def test_chain_seeded_at_one_end():
    # a - b - c, restart 0.5 at a: p_a = 1/2 + 1/2 * p_b/2, p_b = (p_a + p_c)/2, p_c = p_b/4
    # => p_a = 7/12, p_b = 4/12, p_c = 1/12
    p = rank(undirected(3, [(0, 1, 1.0), (1, 2, 1.0)]), [1, 0, 0])
    assert p == pytest.approx([7 / 12, 4 / 12, 1 / 12], abs=1e-9)


def test_star_seeded_at_the_centre_and_at_a_leaf():
    star = undirected(4, [(0, 1, 1.0), (0, 2, 1.0), (0, 3, 1.0)])
    # centre: p_c = 1/2 + 1/2 * 3 * p_leaf, p_leaf = 1/2 * p_c / 3 => p_c = 2/3, leaves 1/9
    assert rank(star, [1, 0, 0, 0]) == pytest.approx([2 / 3, 1 / 9, 1 / 9, 1 / 9], abs=1e-9)
    # leaf 1: p_1 = 1/2 + p_c/6, p_c = 1/2 * (p_1 + 2 p_o), p_o = p_c/6 => p_c = 3/8 ... solved:
    # p_c = p_1/2 + p_c/6 -> p_c = 3 p_1 / 5; p_1 = 1/2 + p_1/10 -> p_1 = 5/9, p_c = 1/3, p_o = 1/18
    assert rank(star, [0, 1, 0, 0]) == pytest.approx([1 / 3, 5 / 9, 1 / 18, 1 / 18], abs=1e-9)


def test_weights_split_the_walk_in_proportion():
    # centre 0 with edges of weight 3 and 1: leaves get p_c/2 * 3/4 and p_c/2 * 1/4
    p = rank(undirected(3, [(0, 1, 3.0), (0, 2, 1.0)]), [1, 0, 0])
    assert p[1] / p[2] == pytest.approx(3.0)
    assert p.sum() == pytest.approx(1.0)


def test_disconnected_parts_get_no_mass_and_dangling_seeds_keep_theirs():
    graph = undirected(5, [(0, 1, 1.0), (2, 3, 1.0)])  # node 4 has no edge
    p = rank(graph, [1, 0, 0, 0, 0])
    assert p[2:] == pytest.approx([0, 0, 0]) and p[:2].sum() == pytest.approx(1.0)
    # two seeds, one in each part, 3:1; mass stays in the seed's part in that proportion
    p = rank(graph, [3, 0, 1, 0, 0])
    assert p[:2].sum() == pytest.approx(0.75) and p[2:4].sum() == pytest.approx(0.25)
    # an isolated seed: every step returns to it
    assert rank(graph, [0, 0, 0, 0, 1]) == pytest.approx([0, 0, 0, 0, 1])


def test_hidden_nodes_get_no_mass_and_do_not_drain_their_neighbours():
    chain = undirected(3, [(0, 1, 1.0), (1, 2, 1.0)])
    p = rank(chain, [1, 0, 0], visible=np.array([True, True, False]))
    # a - b alone: p_a = 1/2 + p_b/2, p_b = p_a/2 => p_a = 2/3, p_b = 1/3
    assert p == pytest.approx([2 / 3, 1 / 3, 0.0], abs=1e-9)


def test_damping_zero_returns_the_seeds_and_bad_input_is_refused():
    chain = undirected(3, [(0, 1, 1.0), (1, 2, 1.0)])
    assert rank(chain, [1, 1, 0], damping=0.0) == pytest.approx([0.5, 0.5, 0.0])
    assert rank(chain, [0, 0, 0]) == pytest.approx([0, 0, 0])
    transposed, dangling = ppr.transition(chain)
    with pytest.raises(RetrievalError, match="damping"):
        ppr.personalized_pagerank(transposed, dangling, np.ones(3), damping=1.0)
    with pytest.raises(RetrievalError, match="shape"):
        ppr.personalized_pagerank(transposed, dangling, np.ones(4))
    with pytest.raises(RetrievalError, match="non-negative"):
        ppr.personalized_pagerank(transposed, dangling, np.array([1.0, -1.0, 0.0]))


def test_passage_seeds_are_min_max_scores_times_the_weight():
    seeds = ppr.passage_seeds({4: 0.9, 7: 0.5, 2: 0.1}, 0.05)
    assert seeds == pytest.approx({4: 0.05, 7: 0.025, 2: 0.0})
    assert ppr.passage_seeds({3: 0.4}, 0.2) == {3: 0.2}  # a single candidate counts as the best
    assert ppr.passage_seeds({}, 0.2) == {}
    with pytest.raises(RetrievalError):
        ppr.passage_seeds({1: 1.0}, -0.1)


def test_entity_seeds_weigh_score_over_chunk_frequency_and_keep_the_heaviest():
    frequency = np.array([1.0, 10.0, 2.0, 4.0, 0.0])
    seeds = ppr.entity_seeds(
        query_entities=[1],  # named by the query: score 1, mentioned by 10 chunks -> 0.1
        chunk_entities={100: [0, 2], 101: [2, 3, 4]},  # chunk 100 scored 1.0, chunk 101 0.5
        chunk_scores={100: 1.0, 101: 0.5}, chunk_frequency=frequency, max_seeds=10)
    # entity 2 is in both chunks: it keeps its best chunk's score; entity 4 (frequency 0) counts as 1
    assert seeds == pytest.approx({0: 1.0, 1: 0.1, 2: 0.5, 3: 0.125, 4: 0.5})
    top = ppr.entity_seeds([1], {100: [0, 2], 101: [2, 3, 4]}, {100: 1.0, 101: 0.5}, frequency, max_seeds=2)
    assert top == pytest.approx({0: 1.0, 2: 0.5})  # ties broken by entity index
    assert ppr.entity_seeds([], {100: [0]}, {100: 0.0}, frequency, max_seeds=5) == {}  # score 0 seeds nothing


def test_specificity_sends_more_mass_through_a_rare_entity_than_a_hub():
    # chunks 0..3; entity e0 (rare) in chunks 0 and 1; e1 (hub) in all four. Seeding both entities by
    # specificity puts more mass on chunk 1 (shares the rare entity with nothing else) than on chunks 2, 3.
    rows = {"chunks": [{"chunk_id": f"c{i}", "scope_path": "__shared__",
                        "entity_ids": ["e0", "e1"] if i < 2 else ["e1"], "counts": [1, 1] if i < 2 else [1]}
                       for i in range(4)],
            # ids sort in the order listed: the graph numbers each table's rows by id
            "entities": [{"entity_id": "e0", "name": "Rare", "type": "ORG", "norm": "rare"},
                         {"entity_id": "e1", "name": "Hub", "type": "GPE", "norm": "hub"}],
            "relations": []}
    graph = build_graph(rows)
    assert list(graph.chunk_frequency) == [2.0, 4.0]
    seeds = ppr.entity_seeds(graph.match_names(["rare", "hub"]), {}, {}, graph.chunk_frequency, max_seeds=5)
    assert seeds == pytest.approx({0: 0.5, 1: 0.25})
    walk = graph.walk_matrix(None)
    reset = np.zeros(graph.n_chunks + graph.n_entities)
    for e, w in seeds.items():
        reset[graph.n_chunks + e] = w
    mass = ppr.personalized_pagerank(walk.transposed, walk.dangling, reset)
    assert mass[0] == pytest.approx(mass[1]) and mass[1] > 1.5 * mass[2]
    assert mass[2] == pytest.approx(mass[3])


def _two_tenant_rows() -> dict:
    # acme's chunk a1 and globex's chunk g1 both mention Bergen; g1 also names Zephyr, related to Bergen; b1 is
    # shared. The ids sort in the order listed: the graph numbers each table's rows by id.
    return {
        "chunks": [{"chunk_id": "a1", "scope_path": "acme", "entity_ids": ["bergen", "falcon"], "counts": [2, 1]},
                   {"chunk_id": "b1", "scope_path": "__shared__", "entity_ids": ["falcon"], "counts": [1]},
                   {"chunk_id": "g1", "scope_path": "globex", "entity_ids": ["bergen", "zephyr"], "counts": [1, 3]},
                   {"chunk_id": "g2", "scope_path": "globex", "entity_ids": ["zephyr"], "counts": [1]}],
        "entities": [{"entity_id": "bergen", "name": "Bergen", "type": "GPE", "norm": "bergen"},
                     {"entity_id": "falcon", "name": "Falcon", "type": "PRODUCT", "norm": "falcon",
                      "alias_norms": ["falcon project"]},
                     {"entity_id": "zephyr", "name": "Zephyr", "type": "ORG", "norm": "zephyr"}],
        "relations": [{"source": "bergen", "target": "zephyr", "type": "CO_OCCURS", "chunk_ids": ["g1"],
                       "chunk_weights": [1]},
                      {"source": "bergen", "target": "falcon", "type": "host", "chunk_ids": ["a1", "x9"],
                       "chunk_weights": [1, 5]}],  # x9: a chunk of another strategy, ignored
        "synonyms": [{"source": "zephyr", "target": "falcon", "score": 0.9}],
    }


def test_build_graph_reads_rows_and_matches_names_and_aliases():
    graph = build_graph(_two_tenant_rows(), version=7)
    assert graph.n_chunks == 4 and graph.n_entities == 3 and graph.version == 7
    assert graph.match_names(["falcon project", "bergen", "nobody"]) == [1, 0]
    # a multi-word name without an exact match: the entities holding all its words, when few do
    rows = {"chunks": [], "relations": [], "entities": [
        {"entity_id": "pb", "name": "Peter Phillip Bonetti", "type": "PERSON", "norm": "peter phillip bonetti"},
        {"entity_id": "pp", "name": "Peter Pan", "type": "PERSON", "norm": "peter pan"}]}
    names = build_graph(rows)
    assert names.match_names(["peter bonetti"]) == [0]
    assert names.match_names(["peter"]) == [] and names.match_names(["peter bonetti"], partial_limit=0) == []
    assert list(graph.chunk_frequency) == [2.0, 2.0, 2.0]
    assert graph.relation_evidence.sum() == pytest.approx(2.0)  # x9's evidence dropped
    assert sorted(graph.entities_of(graph.chunk_node("a1"))) == [0, 1]


def test_walk_in_one_scope_never_reaches_another_scopes_chunks_or_entities():
    graph = build_graph(_two_tenant_rows())
    walk = graph.walk_matrix(["__shared__", "acme"])
    assert list(walk.visible_chunks) == [True, True, False, False]
    assert list(walk.visible_entities) == [True, True, False]  # zephyr is named only by globex's chunks
    reset = np.zeros(graph.n_chunks + graph.n_entities)
    reset[graph.n_chunks + 0] = 1.0  # seed Bergen
    mass = ppr.personalized_pagerank(walk.transposed, walk.dangling, reset)
    assert mass[2] == 0 and mass[3] == 0 and mass[graph.n_chunks + 2] == 0
    assert mass[0] > 0 and mass[1] > 0 and mass.sum() == pytest.approx(1.0)
    # unscoped, the same seed reaches globex's chunks through Bergen and the Zephyr edges
    everything = graph.walk_matrix(None)
    mass = ppr.personalized_pagerank(everything.transposed, everything.dangling, reset)
    assert mass[2] > 0 and mass[3] > 0
    assert graph.walk_matrix(["__shared__", "acme"]) is walk  # cached per visible set


def test_edge_weights_change_the_walk():
    graph = build_graph(_two_tenant_rows())
    reset = np.zeros(graph.n_chunks + graph.n_entities)
    reset[graph.n_chunks + 0] = 1.0
    masses = []
    for weights in (EdgeWeights(svo=0.0, cooccurrence=0.0, synonym=0.0), EdgeWeights(svo=5.0)):
        walk = graph.walk_matrix(None, weights)
        masses.append(ppr.personalized_pagerank(walk.transposed, walk.dangling, reset))
    falcon = graph.n_chunks + 1
    assert masses[1][falcon] > masses[0][falcon]  # the strong "host" relation pulls mass to Falcon


def test_synonym_edges_carry_mass_unless_under_the_score_floor():
    graph = build_graph(_two_tenant_rows())
    reset = np.zeros(graph.n_chunks + graph.n_entities)
    reset[graph.n_chunks + 2] = 1.0  # seed Zephyr; its synonym edge (0.9) leads to Falcon
    falcon = graph.n_chunks + 1
    masses = {}
    for floor in (0.0, 0.95):
        walk = graph.walk_matrix(None, EdgeWeights(svo=0.0, cooccurrence=0.0, synonym_min_score=floor))
        masses[floor] = ppr.personalized_pagerank(walk.transposed, walk.dangling, reset)
    # Falcon is also reached through chunks (Zephyr -> g1 -> Bergen -> a1 -> Falcon), far less directly
    assert masses[0.0][falcon] > 3 * masses[0.95][falcon] > 0


def test_query_names_match_entities_by_name_embedding_above_the_threshold():
    graph = build_graph(_two_tenant_rows())
    assert graph.similar_names("m", np.eye(3, dtype=np.float32), 0.5) == []  # nothing loaded for model m
    # unit name vectors: bergen (1,0), falcon (0.6,0.8), zephyr (0,1); "gone" is not in this snapshot
    graph.set_name_vectors("m", ["zephyr", "gone", "bergen", "falcon"],
                           np.array([[0, 1], [1, 0], [1, 0], [0.6, 0.8]], dtype=np.float32))
    assert graph.has_name_vectors("m") and not graph.has_name_vectors("other")
    query = np.array([[0.8, 0.6]], dtype=np.float32)  # cosine: bergen 0.8, falcon 0.96, zephyr 0.6
    assert [graph.entity_names[e] for e in graph.similar_names("m", query, 0.9)] == ["Falcon"]
    assert graph.similar_names("m", query, 0.97) == []  # under the threshold: no seed
    two = graph.similar_names("m", query, 0.7, per_name=2)
    assert [graph.entity_names[e] for e in two] == ["Falcon", "Bergen"]
    # several query names: each brings its closest entity once
    names = np.array([[1, 0], [0.01, 1], [1, 0]], dtype=np.float32)
    names /= np.linalg.norm(names, axis=1, keepdims=True)
    assert [graph.entity_names[e] for e in graph.similar_names("m", names, 0.9)] == ["Bergen", "Zephyr"]
    assert graph.memory_bytes() > build_graph(_two_tenant_rows()).memory_bytes()  # the vectors are counted
