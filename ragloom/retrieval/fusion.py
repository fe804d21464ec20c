"""Fusion of ranked lists of RetrievedItem (pure): reciprocal rank fusion and weighted min-max fusion.

Both take ``{lane name: items best first}`` and return new items (inputs are never changed), best first,
whose ``score`` is the fused score and whose ``lane_scores`` keep every lane's own raw score.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

from ragloom.errors import RetrievalError
from ragloom.types import RetrievedItem

DEFAULT_RRF_K = 60
METHODS = ("rrf", "weighted", "linear")
SPARSE_LANES = ("bm25",)  # lanes that count as sparse for linear fusion's sparse_weight


def _merge(lists: Mapping[str, Sequence[RetrievedItem]]) -> dict[str, RetrievedItem]:
    """One copy per chunk id, carrying the union of lane scores (each lane's raw score under its name)."""
    merged: dict[str, RetrievedItem] = {}
    for lane, items in lists.items():
        for item in items:
            held = merged.get(item.chunk_id)
            if held is None:
                held = copy.copy(item)
                held.lane_scores = dict(item.lane_scores)
                held.metadata = dict(item.metadata)
                merged[item.chunk_id] = held
            else:
                held.lane_scores.update(item.lane_scores)
                for key, value in item.metadata.items():
                    held.metadata.setdefault(key, value)
            held.lane_scores.setdefault(lane, item.score)
    return merged


def _weights(lists: Mapping[str, Sequence[RetrievedItem]], weights: Mapping[str, float] | None) -> dict[str, float]:
    out = {lane: 1.0 for lane in lists}
    for lane, w in (weights or {}).items():
        if lane in out:
            if not isinstance(w, (int, float)) or w < 0:
                raise RetrievalError(f"fusion weight for lane {lane!r} must be a number >= 0, got {w!r}")
            out[lane] = float(w)
    return out


def _first_ranks(items: Sequence[RetrievedItem]) -> dict[str, int]:
    ranks: dict[str, int] = {}
    for i, item in enumerate(items, start=1):
        ranks.setdefault(item.chunk_id, i)  # a lane listing a chunk twice counts its best rank
    return ranks


def rrf(lists: Mapping[str, Sequence[RetrievedItem]], k: int | None = None, rrf_k: int = DEFAULT_RRF_K,
        weights: Mapping[str, float] | None = None) -> list[RetrievedItem]:
    """Reciprocal rank fusion: score = sum over lanes of weight / (rrf_k + rank in that lane)."""
    if rrf_k < 0:
        raise RetrievalError(f"rrf_k must be >= 0, got {rrf_k}")
    w = _weights(lists, weights)
    merged = _merge(lists)
    scores = dict.fromkeys(merged, 0.0)
    for lane, items in lists.items():
        for chunk_id, rank in _first_ranks(items).items():
            scores[chunk_id] += w[lane] / (rrf_k + rank)
    return _ranked(merged, scores, k)


def weighted(lists: Mapping[str, Sequence[RetrievedItem]], k: int | None = None,
             weights: Mapping[str, float] | None = None) -> list[RetrievedItem]:
    """Weighted sum of min-max normalized lane scores; a chunk a lane did not return counts 0 there.

    A lane whose scores are all equal normalizes to 1 for every item it returned.
    """
    w = _weights(lists, weights)
    merged = _merge(lists)
    scores = dict.fromkeys(merged, 0.0)
    for lane, items in lists.items():
        best: dict[str, float] = {}
        for item in items:
            best[item.chunk_id] = max(best.get(item.chunk_id, item.score), item.score)
        if not best:
            continue
        low, high = min(best.values()), max(best.values())
        for chunk_id, raw in best.items():
            norm = 1.0 if high == low else (raw - low) / (high - low)
            scores[chunk_id] += w[lane] * norm
    return _ranked(merged, scores, k)


def _ranked(merged: dict[str, RetrievedItem], scores: dict[str, float], k: int | None) -> list[RetrievedItem]:
    # ties by chunk id: the same inputs give the same order whatever order the lanes listed them in
    order = sorted(merged, key=lambda cid: (-scores[cid], cid))
    out = []
    for rank, chunk_id in enumerate(order[: k if k is not None else len(order)], start=1):
        item = merged[chunk_id]
        item.score = scores[chunk_id]
        item.rank = rank
        out.append(item)
    return out


def linear_weights(lanes: Sequence[str], sparse_weight: float) -> dict[str, float]:
    """Linear fusion's weights: ``sparse_weight`` for the sparse (BM25) lane, ``1 - sparse_weight`` for others."""
    if not 0.0 <= sparse_weight <= 1.0:
        raise RetrievalError(f"sparse_weight must be between 0 and 1, got {sparse_weight}")
    return {lane: sparse_weight if lane in SPARSE_LANES else 1.0 - sparse_weight for lane in lanes}


def fuse(lists: Mapping[str, Sequence[RetrievedItem]], method: str = "rrf", k: int | None = None,
         rrf_k: int = DEFAULT_RRF_K, weights: Mapping[str, float] | None = None,
         sparse_weight: float = 0.5) -> list[RetrievedItem]:
    """``rrf`` (per-lane ``weights``), ``weighted`` (min-max, per-lane ``weights``) or ``linear`` (min-max,
    ``sparse_weight`` on BM25 and the rest on the other lanes) by name."""
    if method == "rrf":
        return rrf(lists, k=k, rrf_k=rrf_k, weights=weights)
    if method == "weighted":
        return weighted(lists, k=k, weights=weights)
    if method == "linear":
        return weighted(lists, k=k, weights=linear_weights(list(lists), sparse_weight))
    raise RetrievalError(f"unknown fusion method {method!r}; use {' or '.join(METHODS)}")
