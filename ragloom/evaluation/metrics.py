"""Retrieval metrics through ranx, at document and passage level, with bootstrap confidence intervals.

Document level: the retrieved chunks of a query collapse to their documents, each document keeping the
rank of its first chunk; recall@5, recall@10, nDCG@10 and MRR@10 are ranx's over that document list.

Passage level (datasets with gold passage spans): a retrieved chunk is relevant to a gold passage of
the same document when their character spans overlap by at least half of the shorter of the two
(``span_matches``). For a cutoff k the run of a query is built from its first k chunks, in rank order:
each chunk is replaced by the query's gold passages it matches that no earlier chunk matched (ordered
by start), or by a non-relevant placeholder when it matches none. ranx then scores that whole list
(``recall``, ``ndcg``, ``mrr`` without a cutoff), so recall@k is the share of gold passages matched by
the first k chunks and MRR@k is 1 / rank of the first matching chunk, both exactly. nDCG@k is exact
unless one chunk matches several new gold passages: they then take consecutive positions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ragloom.errors import ConfigError
from ragloom.evaluation.datasets import Passage, Qrels

METRICS = ("recall@5", "recall@10", "ndcg@10", "mrr@10")
_PASSAGE_CUTOFF = {"recall@5": 5, "recall@10": 10, "ndcg@10": 10, "mrr@10": 10}
_PASSAGE_METRIC = {"recall@5": "recall", "recall@10": "recall", "ndcg@10": "ndcg", "mrr@10": "mrr"}


@dataclass(frozen=True)
class Hit:
    """One retrieved unit (a chunk, or a whole document / paragraph for the baselines), in rank order."""

    unit_id: str
    document_id: str
    start: int = 0
    end: int = 0


Runs = Mapping[str, Sequence[Hit]]  # query id -> hits, best first
PerQuery = dict[str, np.ndarray]  # metric -> scores aligned with the sorted qrels query ids


def span_matches(a_start: int, a_end: int, b_start: int, b_end: int) -> bool:
    """True when the spans overlap by at least half of the shorter one (touching spans do not overlap)."""
    overlap = min(a_end, b_end) - max(a_start, b_start)
    if overlap <= 0:
        return False
    return 2 * overlap >= min(a_end - a_start, b_end - b_start)


def document_ranking(hits: Sequence[Hit]) -> list[str]:
    """Document ids in the order their first hit appears (each document keeps its first rank)."""
    seen: dict[str, None] = {}
    for hit in hits:
        seen.setdefault(hit.document_id, None)
    return list(seen)


def passage_ranking(hits: Sequence[Hit], gold: Sequence[Passage]) -> list[str]:
    """The hits as gold passage ids per the module docstring; non-matching hits become ``~<position>``."""
    by_doc: dict[str, list[Passage]] = {}
    for p in sorted(gold, key=lambda p: (p.document_id, p.start, p.end)):
        by_doc.setdefault(p.document_id, []).append(p)
    credited: set[str] = set()
    out: list[str] = []
    for position, hit in enumerate(hits):
        new = [p.passage_id for p in by_doc.get(hit.document_id, ())
               if p.passage_id not in credited and span_matches(hit.start, hit.end, p.start, p.end)]
        credited.update(new)
        out.extend(new or [f"~{position}"])
    return out


def _ranx_scores(qrels: Qrels, rankings: Mapping[str, list[str]], metrics: Sequence[str]) -> PerQuery:
    """Per-query ranx scores for ranked id lists (best first), aligned with ``sorted(qrels)``."""
    from ranx import Qrels as RanxQrels
    from ranx import Run, evaluate

    query_ids = sorted(qrels)
    run_dict = {}
    for q in query_ids:
        ranking = rankings.get(q) or ["~empty"]  # ranx needs at least one entry per query
        # strictly decreasing scores so ranx keeps our order exactly (it sorts by score)
        run_dict[q] = {unit: float(len(ranking) - i) for i, unit in enumerate(ranking)}
    run = Run.from_dict(run_dict)
    evaluate(RanxQrels.from_dict({q: dict(qrels[q]) for q in query_ids}), run, list(metrics),
             return_mean=False, make_comparable=True)
    return {m: np.array([float(run.scores[m][q]) for q in query_ids]) for m in metrics}


def document_scores(runs: Runs, qrels: Qrels) -> PerQuery:
    """recall@5, recall@10, nDCG@10, MRR@10 per query at document level."""
    if not qrels:
        raise ConfigError("no relevance judgements to score against")
    return _ranx_scores(qrels, {q: document_ranking(runs.get(q, ())) for q in qrels}, METRICS)


def passage_scores(runs: Runs, passage_qrels: Qrels, passages: Mapping[str, Passage]) -> PerQuery:
    """The same four metrics per query at passage level (span overlap, see the module docstring)."""
    if not passage_qrels:
        raise ConfigError("no passage relevance judgements to score against")
    out: PerQuery = {}
    for cutoff in sorted(set(_PASSAGE_CUTOFF.values())):
        names = [m for m in METRICS if _PASSAGE_CUTOFF[m] == cutoff]
        rankings = {q: passage_ranking(list(runs.get(q, ()))[:cutoff], [passages[p] for p in rel])
                    for q, rel in passage_qrels.items()}
        scored = _ranx_scores(passage_qrels, rankings, sorted({_PASSAGE_METRIC[m] for m in names}))
        out.update({m: scored[_PASSAGE_METRIC[m]] for m in names})
    return {m: out[m] for m in METRICS}


# confidence intervals -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Estimate:
    mean: float
    low: float
    high: float

    def as_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "low": self.low, "high": self.high}


def _resample_indexes(n: int, resamples: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def bootstrap_ci(scores: Sequence[float] | np.ndarray, resamples: int = 1000, seed: int = 0,
                 level: float = 0.95) -> Estimate:
    """Mean over queries with a percentile bootstrap interval (queries resampled with replacement)."""
    values = np.asarray(scores, dtype=float)
    if values.size == 0:
        raise ConfigError("bootstrap over zero queries")
    means = values[_resample_indexes(values.size, resamples, seed)].mean(axis=1)
    tail = (1 - level) / 2 * 100
    return Estimate(float(values.mean()), float(np.percentile(means, tail)), float(np.percentile(means, 100 - tail)))


def paired_difference_ci(scores: Sequence[float] | np.ndarray, baseline: Sequence[float] | np.ndarray,
                         resamples: int = 1000, seed: int = 0, level: float = 0.95) -> Estimate:
    """Mean of (system - baseline) per query, with a paired bootstrap interval (same queries resampled)."""
    a, b = np.asarray(scores, dtype=float), np.asarray(baseline, dtype=float)
    if a.shape != b.shape:
        raise ConfigError(f"paired difference needs scores on the same queries ({a.shape} vs {b.shape})")
    return bootstrap_ci(a - b, resamples=resamples, seed=seed, level=level)
