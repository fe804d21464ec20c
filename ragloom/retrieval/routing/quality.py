"""The quality check behind corrective retry: is a ranked list good enough, or should the next strategy try?

Signals, all from what the search already has: the best dense cosine of the top items to the query
(relevance), the score margin between the first and second item (confidence), the share of the query's
content terms found in the top items' text (coverage), and the share of distinct documents (diversity).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ragloom.retrieval.postprocess import dense_cosine, is_graph_context
from ragloom.retrieval.routing.features import content_terms

TOP = 5  # items the check reads


@dataclass(frozen=True)
class Quality:
    best_cosine: float | None
    margin: float | None
    coverage: float
    diversity: float

    def as_dict(self) -> dict[str, Any]:
        return {k: (None if v is None else round(float(v), 4)) for k, v in asdict(self).items()}


def assess(query: str, items: Sequence[Any], query_vector: np.ndarray | None, top: int = TOP) -> Quality:

    ranked = [i for i in items if not is_graph_context(i)][:top]
    cosines = [c for c in (dense_cosine(i, query_vector) for i in ranked) if c is not None]
    terms = set(content_terms(query))
    text = " ".join(i.text for i in ranked).lower()
    found = set(content_terms(text)) if terms else set()
    coverage = len(terms & found) / len(terms) if terms else 1.0
    diversity = len({i.document_id for i in ranked}) / len(ranked) if ranked else 0.0
    margin = float(cosines[0] - cosines[1]) if len(cosines) > 1 else None
    return Quality(max(cosines) if cosines else None, margin, coverage, diversity)


def weak_reasons(q: Quality, n_items: int, *, min_cosine: float, min_coverage: float, min_margin: float,
                 min_diversity: float) -> list[str]:
    """Why the result is weak (empty: good enough). A threshold of 0 switches its check off."""
    if n_items == 0:
        return ["no results"]
    reasons = []
    if min_cosine > 0 and q.best_cosine is not None and q.best_cosine < min_cosine:
        reasons.append(f"best dense cosine {q.best_cosine:.3f} < {min_cosine:.2f}")
    if min_coverage > 0 and q.coverage < min_coverage:
        reasons.append(f"query-term coverage {q.coverage:.2f} < {min_coverage:.2f}")
    if min_margin > 0 and q.margin is not None and q.margin < min_margin:
        reasons.append(f"score margin {q.margin:.3f} < {min_margin:.3f}")
    if min_diversity > 0 and q.diversity < min_diversity:
        reasons.append(f"document diversity {q.diversity:.2f} < {min_diversity:.2f}")
    return reasons
