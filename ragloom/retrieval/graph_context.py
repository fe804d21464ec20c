"""graph_rag's context item: the relations on the walk's most probable paths from the query's entities to the
chunks it returns, typed (subject-verb-object) relations before co-occurrence, each citing a readable chunk that
states it; written by a registered serializer (``text``, ``json``, or one of yours).

A path is scored by the walk itself: the probability that the walk, leaving a query entity, follows exactly
these entity-to-entity edges and then steps into the returned chunk (the product of the transition
probabilities; Dijkstra over ``-log p``). Only relations the walk used are considered, so the relation filter,
the edge weights, ``max_hops`` and the caller's scope all shape the explanation as they shaped the ranking.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from ragloom.errors import ConfigError
from ragloom.retrieval.graph_index import COOCCURS, RetrievalGraph, Walk
from ragloom.retrieval.postprocess import GRAPH_SOURCE
from ragloom.types import RetrievedItem, sha256_hex

TITLE = "Knowledge graph"
PATH_CHUNKS = 10  # returned chunks a path is looked for, best first
PATH_TARGETS = 20  # entities of the returned chunks a path is drawn to, those with the most mass
NODE_CHUNKS = 20  # chunk ids listed per entity (the count says how many there are)


@dataclass
class Explanation:
    """What the context item says, as data: ``nodes`` (entities), ``edges`` (relations, each with the chunk
    that states it) and ``paths`` (per returned chunk, the entities from a query entity to it)."""

    seeds: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    edges: list[dict[str, Any]]
    paths: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"seeds": self.seeds, "nodes": self.nodes, "edges": self.edges, "paths": self.paths}


Serializer = Callable[[Explanation], str]
_SERIALIZERS: dict[str, Serializer] = {}


def register_context_serializer(name: str) -> Callable[[Serializer], Serializer]:
    """Register ``fn(explanation) -> str`` as a ``context_format`` of graph_rag; a taken name is refused."""
    def register(fn: Serializer) -> Serializer:
        if name in _SERIALIZERS:
            raise ConfigError(f"context serializer {name!r} is already registered")
        _SERIALIZERS[name] = fn
        return fn
    return register


def context_formats() -> tuple[str, ...]:
    return tuple(_SERIALIZERS)


@register_context_serializer("text")
def text_triples(explanation: Explanation) -> str:
    """One relation a line: ``Source (TYPE) -[PREDICATE]-> Target (TYPE) [chunk <id>]``."""
    names = {n["entity_id"]: n for n in explanation.nodes}
    lines = [f"{TITLE}: relations linking the query's entities to the passages (typed first; [chunk] states it)"]
    for edge in explanation.edges:
        s, t = names[edge["source"]], names[edge["target"]]
        lines.append(f"{s['name']} ({s['type']}) -[{edge['type']}]-> {t['name']} ({t['type']}) "
                     f"[chunk {edge['chunk_id']}]")
    return "\n".join(lines)


@register_context_serializer("json")
def json_document(explanation: Explanation) -> str:
    """The explanation as one JSON object (seeds, nodes without their chunk lists, edges, paths)."""
    nodes = [{k: v for k, v in n.items() if k != "chunks"} for n in explanation.nodes]
    return json.dumps({"title": TITLE, **explanation.as_dict(), "nodes": nodes}, ensure_ascii=False)


def explain(graph: RetrievalGraph, walk: Walk, mass: np.ndarray, sources: Sequence[int], returned: Sequence[str],
            max_edges: int) -> Explanation | None:
    """The relations on the most probable walk paths from the entities ``sources`` to the entities of the chunks
    ``returned`` (readable chunk ids, best first): per entity, its most probable path over typed relations
    alone, else over every walked relation, for the ``PATH_TARGETS`` entities with the most mass (heaviest first,
    until ``max_edges`` relations); then typed relations stated in a returned chunk between entities of those
    paths. Written typed before co-occurrence. None when no relation qualifies."""
    n_chunks = graph.n_chunks
    costs = _costs(graph, walk)
    alive = walk.visible_entities & (mass[n_chunks:] > 0)
    sources = [int(s) for s in dict.fromkeys(sources) if alive[s]]
    if max_edges <= 0 or not sources or costs is None:
        return None
    returned_nodes = [node for c in returned[:PATH_CHUNKS]
                      if (node := graph.chunk_node(c)) is not None and walk.visible_chunks[node]]
    returned_set = set(returned_nodes)
    targets: dict[int, int] = {}  # entity -> the best returned chunk naming it
    for node in returned_nodes:
        for e in graph.entities_of(node):
            if alive[e] and int(e) not in sources:
                targets.setdefault(int(e), node)
    # the entities the walk weighs most: a chunk names many, and a path to each would bury the answer
    targets = {e: targets[e] for e in sorted(targets, key=lambda e: (-mass[n_chunks + e], e))[:PATH_TARGETS]}
    # per target, its most probable path over typed relations, else over every walked relation
    best: dict[int, tuple[float, list[int], bool]] = {}
    for typed_only, cost in ((True, costs["typed"]), (False, costs["all"])):
        if not targets or cost.nnz == 0:
            continue
        dist, predecessors, _ = dijkstra(_between_alive(cost, alive), directed=True, indices=sources,
                                         min_only=True, return_predecessors=True)
        for target in targets:
            if np.isfinite(dist[target]) and target not in best:
                best[target] = (float(np.exp(-dist[target])), _chain(predecessors, target), typed_only)
    chosen: dict[int, int] = {}  # relation -> the returned chunk whose entity its path reaches
    paths: list[dict[str, Any]] = []
    on_path = np.zeros(graph.n_entities, dtype=bool)
    on_path[sources] = True
    for target in sorted(best, key=lambda t: (-mass[n_chunks + t], t)):
        if len(chosen) >= max_edges:
            break
        probability, chain, typed_only = best[target]
        on_path[chain] = True
        paths.append({"chunk_id": graph.chunk_ids[targets[target]], "entities": [graph.entity_ids[e] for e in chain],
                      "probability": probability})
        for u, v in zip(chain, chain[1:], strict=False):
            for r in _strongest(graph, costs, u, v, typed_only):
                chosen.setdefault(r, targets[target])
    # then typed relations stated in a returned chunk between entities on a path
    pairs = graph.relation_pairs
    candidates = np.flatnonzero(costs["typed_walked"] & on_path[pairs[:, 0]] & on_path[pairs[:, 1]]) \
        if len(pairs) else np.zeros(0, dtype=np.int64)
    beside = {int(r): cited for r in candidates if int(r) not in chosen
              and (cited := _cite(graph, walk, mass, int(r), returned_set, None)) in returned_set}
    if not chosen and not beside:
        return None
    weight = costs["weight"]
    ranked = [*chosen, *sorted(beside, key=lambda r: (-weight[r], r))]
    ranked = sorted(ranked[:max_edges], key=lambda r: graph.relation_types[r] == COOCCURS)  # typed first, stable
    found = {**beside, **chosen}
    edges = []
    for r in ranked:
        a, b = (int(x) for x in pairs[r])
        kind = graph.relation_types[r]
        edges.append({"source": graph.entity_ids[a], "target": graph.entity_ids[b], "type": kind,
                      "family": "co_occurs" if kind == COOCCURS else "svo",
                      "chunk_id": graph.chunk_ids[_cite(graph, walk, mass, r, returned_set, found[r])],
                      "on_path": r in chosen})
    used = dict.fromkeys([*sources, *(int(x) for r in ranked for x in pairs[r])])
    seed_ids = {graph.entity_ids[s] for s in sources}
    nodes = [_node(graph, walk, mass, e, graph.entity_ids[e] in seed_ids) for e in used]
    seeds = [{"entity_id": graph.entity_ids[s], "name": graph.entity_names[s], "type": graph.entity_types[s]}
             for s in sources]
    return Explanation(seeds, nodes, edges, paths)


def _costs(graph: RetrievalGraph, walk: Walk) -> dict[str, Any] | None:
    """Per walk, built once: ``-log p`` of each entity-to-entity step over a walked relation (``all``) and over a
    walked typed relation (``typed``), and which relations are walked (None: none is)."""
    if "explain" in walk.derived:
        return walk.derived["explain"]
    n_chunks, n = graph.n_chunks, graph.n_entities
    weight = walk.relation_weight if walk.relation_weight is not None else np.ones(len(graph.relation_types))
    walked = weight > 0
    typed = np.fromiter((t != COOCCURS for t in graph.relation_types), dtype=bool, count=len(graph.relation_types))
    out: dict[str, Any] | None = None
    if walked.any():
        step = walk.transposed[n_chunks:, n_chunks:].T.tocsr()  # P between entities: row u, where u steps
        out = {"weight": weight, "walked": walked, "typed_walked": walked & typed}
        for name, mask in (("all", walked), ("typed", walked & typed)):
            a, b = graph.relation_pairs[mask, 0], graph.relation_pairs[mask, 1]
            on = sp.csr_matrix((np.ones(2 * len(a)), (np.concatenate([a, b]), np.concatenate([b, a]))), shape=(n, n))
            cost = step.multiply(on > 0).tocsr()
            cost.eliminate_zeros()
            # a tiny floor: a step of p = 1 costs more than nothing (scipy 1.17's csgraph walks a stored zero
            # as an edge of no cost)
            cost.data = -np.log(cost.data) + 1e-12
            out[name] = cost
    walk.derived["explain"] = out
    return out


def _between_alive(cost: sp.csr_matrix, alive: np.ndarray) -> sp.csr_matrix:
    """``cost`` without the steps into or out of an entity not ``alive``: ``diag(alive) @ cost @ diag(alive)``,
    in one pass over the stored steps instead of two sparse products (~1.5 ms a query on SciFact's graph). The
    steps are dropped, not zeroed: csgraph reads a stored zero as an edge of no cost."""
    rows = np.repeat(np.arange(cost.shape[0]), np.diff(cost.indptr))
    keep = alive[rows] & alive[cost.indices]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=cost.shape[0]))])
    return sp.csr_matrix((cost.data[keep], cost.indices[keep], indptr), shape=cost.shape)


def _chain(predecessors: np.ndarray, end: int) -> list[int]:
    chain = [end]
    while predecessors[chain[-1]] >= 0:
        chain.append(int(predecessors[chain[-1]]))
    return chain[::-1]


def _strongest(graph: RetrievalGraph, costs: dict[str, Any], u: int, v: int, typed_only: bool) -> list[int]:
    """The walked typed relations between two entities, or (``typed_only`` false, none typed) their
    co-occurrence."""
    between = graph.relations_between(u, v)
    between = between[costs["walked"][between]]
    typed = [int(r) for r in between if costs["typed_walked"][r]]
    return typed or ([] if typed_only else [int(r) for r in between])


def _cite(graph: RetrievalGraph, walk: Walk, mass: np.ndarray, relation: int, returned: set[int],
          prefer: int | None) -> int:
    """The readable chunk that states ``relation``: ``prefer`` if it does, else a returned one, else the one
    with the most mass."""
    evidence = graph.relation_evidence
    chunks = evidence.indices[evidence.indptr[relation]:evidence.indptr[relation + 1]]
    chunks = [int(c) for c in chunks if walk.visible_chunks[c]]
    return min(chunks, key=lambda c: (c != prefer, c not in returned, -mass[c], c))


def _node(graph: RetrievalGraph, walk: Walk, mass: np.ndarray, entity: int, seed: bool) -> dict[str, Any]:
    mentions = graph.mentions_t
    chunks = mentions.indices[mentions.indptr[entity]:mentions.indptr[entity + 1]]
    chunks = chunks[walk.visible_chunks[chunks]]
    chunks = [int(c) for c in chunks[np.lexsort((chunks, -mass[chunks]))]]
    return {"entity_id": graph.entity_ids[entity], "name": graph.entity_names[entity],
            "type": graph.entity_types[entity], "seed": seed, "mass": float(mass[graph.n_chunks + entity]),
            "chunks": [graph.chunk_ids[c] for c in chunks[:NODE_CHUNKS]], "chunk_count": len(chunks)}


def context_item(explanation: Explanation, context_format: str) -> RetrievedItem:
    """The explanation as graph_rag's rank-0 context item; the structure travels in ``metadata["graph"]``."""
    serializer = _SERIALIZERS.get(context_format)
    if serializer is None:
        raise ConfigError(f"unknown context format {context_format!r}; registered: {', '.join(_SERIALIZERS)}")
    text = serializer(explanation)
    chunk_id = "graph:" + sha256_hex(text)[:16]
    typed = sum(e["family"] == "svo" for e in explanation.edges)
    return RetrievedItem(
        chunk_id=chunk_id, document_id=chunk_id, text=text, score=0.0, rank=0, heading_path=[TITLE],
        lane_scores={}, metadata={
            "source": GRAPH_SOURCE, "title": TITLE, "format": context_format, "edges": len(explanation.edges),
            "typed_edges": typed, "entities": sorted(n["name"] for n in explanation.nodes),
            "seeds": [s["name"] for s in explanation.seeds], "graph": explanation.as_dict()})
