"""Retrieval metrics through ranx, at document and passage level, with bootstrap confidence intervals.

Document level: the retrieved chunks of a query collapse to their documents, each document keeping the
rank of its first chunk; recall@2, recall@5, recall@10, nDCG@10 and MRR@10 are ranx's over that document
list, and ar@5 is 1 for a query whose gold units are all in the top 5 (recall@5 = 1), else 0.

Passage level (datasets with gold passage spans): a retrieved chunk is relevant to a gold passage of
the same document when their character spans overlap by at least half of the shorter of the two
(``span_matches``). For a cutoff k the run of a query is built from its first k chunks, in rank order:
each chunk is replaced by the query's gold passages it matches that no earlier chunk matched (ordered
by start), or by a non-relevant placeholder when it matches none. ranx then scores that whole list
(``recall``, ``ndcg``, ``mrr`` without a cutoff), so recall@k is the share of gold passages matched by
the first k chunks and MRR@k is 1 / rank of the first matching chunk, both exactly. nDCG@k is exact
unless one chunk matches several new gold passages: they then take consecutive positions.

Recall at a token budget (passage level, ``tokrecall@B``): the share of the query's gold passage characters
covered by the first B tokens of retrieved text. Hits are read in rank order, each costing its token count
(a hit that does not fit whole contributes the proportional prefix of its span); text retrieved twice
(overlapping chunks, a parent and its child) costs twice but covers once. Unlike recall@k it does not
reward bigger chunks: every chunking gets the same number of tokens to spend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from ragloom.errors import ConfigError
from ragloom.evaluation.datasets import Passage, Qrels

K = TypeVar("K")

# ar@5: share of questions with all their gold units in the top 5 (HippoRAG's "AR@5"), from recall@5.
METRICS = ("recall@2", "recall@5", "recall@10", "ar@5", "ndcg@10", "mrr@10")
_RANX_METRICS = ("recall@2", "recall@5", "recall@10", "ndcg@10", "mrr@10")
TOKEN_BUDGETS = (512, 1024, 2048)
BUDGET_METRICS = tuple(f"tokrecall@{b}" for b in TOKEN_BUDGETS)
CHARS_PER_TOKEN = 4  # a hit that does not say its token count (baseline units) is estimated from its span
_PASSAGE_CUTOFF = {"recall@2": 2, "recall@5": 5, "recall@10": 10, "ndcg@10": 10, "mrr@10": 10}
_PASSAGE_METRIC = {"recall@2": "recall", "recall@5": "recall", "recall@10": "recall", "ndcg@10": "ndcg",
                   "mrr@10": "mrr"}


@dataclass(frozen=True)
class Hit:
    """One retrieved unit (a chunk, or a whole document / paragraph for the baselines), in rank order."""

    unit_id: str
    document_id: str
    start: int = 0
    end: int = 0
    tokens: int = 0  # the hit's text in the embedding model's tokens; 0 = unknown (estimated from the span)


def level_metrics(level: str) -> tuple[str, ...]:
    """The metrics reported at a level: the four ranking metrics, and at passage level the token budgets."""
    return METRICS + BUDGET_METRICS if level == "passage" else METRICS


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


def _union(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Characters in both unions of disjoint sorted spans."""
    total, i, j = 0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def budget_recall(hits: Sequence[Hit], gold: Sequence[Passage], budget: int) -> float:
    """Share of the gold passages' characters inside the first ``budget`` tokens of the hits (module docstring)."""
    gold_spans: dict[str, list[tuple[int, int]]] = {}
    for p in gold:
        gold_spans.setdefault(p.document_id, []).append((p.start, p.end))
    gold_union = {doc: _union(spans) for doc, spans in gold_spans.items()}
    gold_chars = sum(end - start for spans in gold_union.values() for start, end in spans)
    if gold_chars == 0:
        return 0.0
    covered: dict[str, list[tuple[int, int]]] = {}
    left = budget
    for hit in hits:
        if left <= 0:
            break
        length = hit.end - hit.start
        cost = hit.tokens or max(1, -(-length // CHARS_PER_TOKEN))
        end = hit.end if cost <= left else hit.start + int(length * left / cost)
        left -= min(cost, left)
        if hit.document_id in gold_union:
            covered.setdefault(hit.document_id, []).append((hit.start, end))
    found = sum(_overlap(_union(spans), gold_union[doc]) for doc, spans in covered.items())
    return found / gold_chars


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
    """recall@2, recall@5, recall@10, ar@5, nDCG@10, MRR@10 per query at document level."""
    if not qrels:
        raise ConfigError("no relevance judgements to score against")
    scores = _ranx_scores(qrels, {q: document_ranking(runs.get(q, ())) for q in qrels}, _RANX_METRICS)
    return _with_all_recall(scores)


def _with_all_recall(scores: PerQuery) -> PerQuery:
    scores["ar@5"] = (scores["recall@5"] >= 1.0 - 1e-9).astype(float)
    return {m: scores[m] for m in METRICS}


def passage_scores(runs: Runs, passage_qrels: Qrels, passages: Mapping[str, Passage]) -> PerQuery:
    """The same ranking metrics per query at passage level (span overlap), and recall at each token budget
    (see the module docstring)."""
    if not passage_qrels:
        raise ConfigError("no passage relevance judgements to score against")
    out: PerQuery = {}
    for cutoff in sorted(set(_PASSAGE_CUTOFF.values())):
        names = [m for m in _RANX_METRICS if _PASSAGE_CUTOFF[m] == cutoff]
        rankings = {q: passage_ranking(list(runs.get(q, ()))[:cutoff], [passages[p] for p in rel])
                    for q, rel in passage_qrels.items()}
        scored = _ranx_scores(passage_qrels, rankings, sorted({_PASSAGE_METRIC[m] for m in names}))
        out.update({m: scored[_PASSAGE_METRIC[m]] for m in names})
    query_ids = sorted(passage_qrels)
    for budget, name in zip(TOKEN_BUDGETS, BUDGET_METRICS, strict=True):
        out[name] = np.array([budget_recall(list(runs.get(q, ())), [passages[p] for p in passage_qrels[q]], budget)
                              for q in query_ids])
    out["ar@5"] = (out["recall@5"] >= 1.0 - 1e-9).astype(float)
    return {m: out[m] for m in level_metrics("passage")}


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


def clearly_better(scores: Sequence[float] | np.ndarray, baseline: Sequence[float] | np.ndarray, seed: int = 0) -> bool:
    """Whether ``scores`` beat ``baseline`` on the same queries with the paired 95% interval above zero."""
    return paired_difference_ci(scores, baseline, seed=seed).low > 0


def choose_with_evidence(scores: Mapping[K, Sequence[float] | np.ndarray], default: K, seed: int = 0) -> K:
    """The candidate to adopt from per-query scores on the training queries: ``default`` unless another candidate
    beats it with the paired 95% interval above zero, and then the best mean among those that do. Candidates whose
    means differ by less than the queries can tell apart keep the default, so a choice is never made on noise (a
    difference in the fifth decimal once decided a held-out fold)."""
    if default not in scores:
        raise ConfigError("the default is not among the candidates")
    base = scores[default]
    better = {key: float(np.mean(s)) for key, s in scores.items()
              if key != default and clearly_better(s, base, seed=seed)}
    return max(better, key=lambda key: better[key]) if better else default
