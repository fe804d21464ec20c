"""Personalized PageRank by power iteration over a sparse graph, and the seed weights graph_rag gives it (pure).

The walk: from a node, follow one of its edges with probability ``damping`` (edges chosen in proportion to
their weight), or jump back to a seed with probability ``1 - damping`` (seeds chosen in proportion to their
reset weight). A node without edges jumps back to the seeds. The stationary distribution ``p`` solves
``p = (1 - damping) * s + damping * (P^T p + dangling(p) * s)`` with ``P`` the row-normalised adjacency;
the power iteration below reaches it to within ``tol`` (L1) in about log(tol) / log(damping) steps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import scipy.sparse as sp

from ragloom.errors import RetrievalError


def transition(adjacency: sp.spmatrix, visible: np.ndarray | None = None) -> tuple[sp.csr_matrix, np.ndarray]:
    """(P^T as CSR, dangling-node mask) for a symmetric weighted adjacency.

    ``visible`` (a boolean node mask) removes every edge touching a hidden node before normalising, so no
    probability ever moves onto a hidden node and visible nodes do not leak mass towards hidden ones.
    """
    adjacency = sp.csr_matrix(adjacency, dtype=np.float64)
    if visible is not None:
        keep = sp.diags(np.asarray(visible, dtype=np.float64))
        adjacency = (keep @ adjacency @ keep).tocsr()
    adjacency.eliminate_zeros()
    degree = np.asarray(adjacency.sum(axis=1)).ravel()
    inverse = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
    transposed = (sp.diags(inverse) @ adjacency).T.tocsr()
    return transposed, degree <= 0


def personalized_pagerank(transposed: sp.csr_matrix, dangling: np.ndarray, reset: np.ndarray, *,
                          damping: float = 0.5, max_iter: int = 50, tol: float = 1e-8) -> np.ndarray:
    """Stationary probabilities of the walk restarting at ``reset`` (any non-negative weights; normalised here).

    ``transposed`` and ``dangling`` come from :func:`transition`. All-zero reset weights give all zeros.
    """
    if not 0.0 <= damping < 1.0:
        raise RetrievalError(f"PageRank damping={damping} must be in [0, 1)")
    reset = np.asarray(reset, dtype=np.float64)
    if reset.shape != (transposed.shape[0],):
        raise RetrievalError(f"reset vector has shape {reset.shape}; the graph has {transposed.shape[0]} nodes")
    if np.any(reset < 0) or not np.all(np.isfinite(reset)):
        raise RetrievalError("reset weights must be finite and non-negative")
    total = reset.sum()
    if total <= 0:
        return np.zeros_like(reset)
    start = reset / total
    rank = start.copy()
    for _ in range(max_iter):
        following = damping * (transposed @ rank)
        # restart mass plus whatever sat on nodes without edges goes back to the seeds
        following += (1.0 - damping + damping * rank[dangling].sum()) * start
        change = np.abs(following - rank).sum()
        rank = following
        if change < tol:
            break
    return rank


def min_max(scores: Iterable[float]) -> np.ndarray:
    """Scores mapped to [0, 1]; equal scores (or a single one) all map to 1."""
    values = np.asarray(list(scores), dtype=np.float64)
    if values.size == 0:
        return values
    low, high = values.min(), values.max()
    if high - low <= 0:
        return np.ones_like(values)
    return (values - low) / (high - low)


def passage_seeds(scores: Mapping[int, float], passage_weight: float) -> dict[int, float]:
    """Candidate chunk node -> reset weight: its min-max normalised retrieval score × ``passage_weight``."""
    if passage_weight < 0:
        raise RetrievalError(f"passage_weight={passage_weight} must be >= 0")
    nodes = list(scores)
    return {node: float(w) * passage_weight for node, w in zip(nodes, min_max(scores.values()), strict=True)}


def entity_seeds(query_entities: Iterable[int], chunk_entities: Mapping[int, Iterable[int]],
                 chunk_scores: Mapping[int, float], chunk_frequency: np.ndarray, *,
                 max_seeds: int) -> dict[int, float]:
    """Entity -> reset weight, node specificity included: an entity the query names scores 1, an entity of a
    top chunk scores that chunk's (normalised) score, and each score is divided by the number of chunks
    mentioning the entity. Keeps the ``max_seeds`` heaviest (ties broken by entity index)."""
    score: dict[int, float] = {}
    for entity in query_entities:
        score[entity] = 1.0
    for chunk, entities in chunk_entities.items():
        for entity in entities:
            score[entity] = max(score.get(entity, 0.0), float(chunk_scores[chunk]))
    weights = {e: s / max(float(chunk_frequency[e]), 1.0) for e, s in score.items() if s > 0}
    kept = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[: max(max_seeds, 0)]
    return dict(kept)


def neighbourhood(transposed: sp.csr_matrix, seeds: np.ndarray, hops: int) -> np.ndarray:
    """Boolean mask of the nodes at most ``hops`` edges from a node where ``seeds`` > 0 (edges of the walk
    built by :func:`transition`, whose pattern is symmetric)."""
    reached = np.asarray(seeds) > 0
    frontier = reached.astype(np.float64)
    for _ in range(max(hops, 0)):
        step = (transposed @ frontier) > 0
        new = step & ~reached
        if not new.any():
            break
        reached |= new
        frontier = new.astype(np.float64)
    return reached


def restrict(transposed: sp.csr_matrix, keep: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """The walk confined to the nodes in ``keep``: (P^T of the kept nodes, their dangling mask, their indexes).

    Each kept node's steps to kept nodes are renormalised, so its outgoing probabilities still sum to one and
    no mass reaches a node outside; a kept node whose every edge leaves the set becomes dangling (its mass
    returns to the seeds). The same walk as :func:`transition` over the subgraph induced by ``keep``.
    """
    index = np.flatnonzero(keep)
    sub = transposed[index][:, index].tocsc()  # column j: where node j steps
    stay = np.asarray(sub.sum(axis=0)).ravel()
    inverse = np.divide(1.0, stay, out=np.zeros_like(stay), where=stay > 0)
    sub = (sub @ sp.diags(inverse)).tocsr()
    sub.eliminate_zeros()
    return sub, stay <= 0, index


def bounded_pagerank(transposed: sp.csr_matrix, dangling: np.ndarray, reset: np.ndarray, *, max_hops: int | None,
                     damping: float = 0.5, max_iter: int = 50, tol: float = 1e-8) -> np.ndarray:
    """:func:`personalized_pagerank` where no mass leaves the ``max_hops`` neighbourhood of the seeds (the
    nodes with reset weight): the walk runs on the subgraph induced by that neighbourhood. None: no bound."""
    if max_hops is None:
        return personalized_pagerank(transposed, dangling, reset, damping=damping, max_iter=max_iter, tol=tol)
    reset = np.asarray(reset, dtype=np.float64)
    if reset.shape != (transposed.shape[0],) or np.any(reset < 0) or not np.all(np.isfinite(reset)):
        raise RetrievalError(f"reset weights must be {transposed.shape[0]} finite non-negative numbers")
    keep = neighbourhood(transposed, reset, max_hops)
    sub, sub_dangling, index = restrict(transposed, keep)
    rank = np.zeros(transposed.shape[0])
    rank[index] = personalized_pagerank(sub, sub_dangling | dangling[index], reset[index], damping=damping,
                                        max_iter=max_iter, tol=tol)
    return rank
