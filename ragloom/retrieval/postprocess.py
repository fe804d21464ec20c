"""Steps applied to a strategy's ranked items (pure): near-duplicate removal, neighbour scoring, abstention,
lost-in-the-middle reordering, and context assembly under a token budget with numbered citations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from ragloom.chunking.tokens import get_token_counter
from ragloom.errors import RetrievalError
from ragloom.types import HEADING_SEPARATOR, RetrievalResult, RetrievedItem

# Copies only. Distinct but parallel passages (two rules that differ in what they govern, "Private Fund" vs "Public
# Fund") embed at 0.92-0.97 with all-MiniLM-L6-v2; on ObliQA the chunk pairs at or above 0.98 are copies of one
# text (word-sequence similarity >= 0.9 for 31 of the 32 pairs of three chunkings). README: "Near-duplicates:
# copies, not parallel rules".
DEFAULT_DEDUP_THRESHOLD = 0.98
# Not 0.5 (a common choice): on SciFact (809 answerable claims, all-MiniLM-L6-v2, recursive chunks) the best
# chunk's cosine is below 0.5 for about a third of the queries, and below 0.30 for under 1%; off-topic
# questions score 0.05-0.20 (benchmarks/query_latency.py --abstention prints the distribution).
DEFAULT_ABSTAIN_FLOOR = 0.30
GRAPH_SOURCE = "graph_rag"


def item_vector(item: RetrievedItem) -> np.ndarray | None:
    vector = item.metadata.get("vector")
    if vector is None:
        return None
    return np.asarray(vector, dtype=np.float32)


def remove_near_duplicates(items: Sequence[RetrievedItem], threshold: float = DEFAULT_DEDUP_THRESHOLD
                           ) -> tuple[list[RetrievedItem], list[str]]:
    """Keep an item unless its vector has cosine >= threshold with a better-ranked kept item.

    Items without a vector (the graph context item, stores that did not return vectors) are always kept.
    Returns (kept, chunk ids removed).
    """
    kept: list[RetrievedItem] = []
    kept_units: np.ndarray | None = None  # the kept unit vectors, row by row (filled up to n_kept)
    n_kept = 0
    removed: list[str] = []
    for item in items:
        vector = item_vector(item)
        if vector is not None:
            norm = float(np.linalg.norm(vector))
            unit = vector / norm if norm > 0 else vector
            if n_kept and float(np.max(kept_units[:n_kept] @ unit)) >= threshold:
                removed.append(item.chunk_id)
                continue
            if kept_units is None:
                kept_units = np.empty((len(items), len(unit)), dtype=unit.dtype)
            kept_units[n_kept] = unit
            n_kept += 1
        kept.append(item)
    return kept, removed


def keeps(items: Sequence[RetrievedItem], k: int, threshold: float | None) -> bool:
    """Whether ``items`` (best first) still give ``k`` after de-duplication at ``threshold`` (None: none):
    then the items after them cannot change the first ``k`` that post-processing keeps."""
    return len(items if threshold is None else remove_near_duplicates(items, threshold)[0]) >= k


NEIGHBOUR_SCOPES = ("section", "document")


def neighbour_key(item: RetrievedItem, scope: str) -> tuple | None:
    """What two items must share to be neighbours: document and level (the heading path too for
    ``scope="section"``); None when the item carries no reading position (the graph context item)."""
    position = item.metadata.get("position")
    if position is None:
        return None
    key = (item.document_id, item.metadata.get("level") or 0)
    return (*key, tuple(item.heading_path)) if scope == "section" else key


def neighbour_boost(items: Sequence[RetrievedItem], weight: float, scope: str = "section") -> list[RetrievedItem]:
    """The items re-ranked by ``score + weight × mean score of their retrieved neighbours``.

    A chunk's neighbours are the chunks right before and after it in reading order (``metadata["position"]``
    ± 1, same document and level; with ``scope="section"`` also the same heading path) that are among
    ``items``: a passage whose surroundings also match the query moves up, an isolated hit does not. Only
    retrieved neighbours count (nothing is fetched) and no item is added or dropped. Each item's score becomes
    the boosted one, the bonus is kept in ``metadata["neighbour_bonus"]``; ties go by chunk id. ``weight`` 0
    returns the items unchanged.
    """
    if weight <= 0:
        return list(items)
    if scope not in NEIGHBOUR_SCOPES:
        raise RetrievalError(f"neighbour_scope={scope!r}: one of {', '.join(NEIGHBOUR_SCOPES)}")
    keys = [neighbour_key(item, scope) for item in items]
    at: dict[tuple, float] = {}
    for item, key in zip(items, keys, strict=True):
        if key is not None:
            at.setdefault((*key, int(item.metadata["position"])), item.score)
    boosted: list[RetrievedItem] = []
    for item, key in zip(items, keys, strict=True):
        bonus = 0.0
        if key is not None:
            position = int(item.metadata["position"])
            found = [at[k] for k in ((*key, position - 1), (*key, position + 1)) if k in at]
            bonus = weight * sum(found) / len(found) if found else 0.0
        boosted.append(replace(item, score=item.score + bonus, heading_path=list(item.heading_path),
                               lane_scores=dict(item.lane_scores),
                               metadata={**item.metadata, "neighbour_bonus": bonus}))
    return sorted(boosted, key=lambda i: (-i.score, i.chunk_id))


def cap_per_document(items: Sequence[RetrievedItem], limit: int) -> tuple[list[RetrievedItem], list[str]]:
    """At most ``limit`` items per document, best first (0 = no cap). Returns (kept, chunk ids dropped)."""
    if limit <= 0:
        return list(items), []
    seen: dict[str, int] = {}
    kept, dropped = [], []
    for item in items:
        seen[item.document_id] = seen.get(item.document_id, 0) + 1
        (kept if seen[item.document_id] <= limit else dropped).append(item)
    return kept, [item.chunk_id for item in dropped]


def stand_in(parent: RetrievedItem, hit: RetrievedItem) -> RetrievedItem:
    """A copy of ``parent`` standing in for ``hit``: it takes the hit's score and lane scores."""
    return RetrievedItem(chunk_id=parent.chunk_id, document_id=parent.document_id, text=parent.text,
                         score=hit.score, heading_path=list(parent.heading_path), lane_scores=dict(hit.lane_scores),
                         metadata=dict(parent.metadata))


def replace_by_parents(items: Sequence[RetrievedItem], parents: dict[str, RetrievedItem]) -> list[RetrievedItem]:
    """Each item replaced by its parent (``metadata["parent_id"]``) when ``parents`` has it, at the best
    child's place; children of one parent give it once, listed in ``metadata["expanded_from"]``."""
    out: dict[str, RetrievedItem] = {}
    for item in items:
        parent = parents.get(item.metadata.get("parent_id") or "")
        if parent is None or parent.chunk_id == item.chunk_id:
            out.setdefault(item.chunk_id, item)
            continue
        if parent.chunk_id not in out:
            out[parent.chunk_id] = stand_in(parent, item)
            out[parent.chunk_id].metadata["expanded_from"] = []
        out[parent.chunk_id].metadata.setdefault("expanded_from", []).append(item.chunk_id)
    return list(out.values())


def dense_cosine(item: RetrievedItem, query_vector: np.ndarray | None) -> float | None:
    """The item's cosine to the query: the dense lane's score when it ran, else from the item's vector."""
    if "dense" in item.lane_scores:
        return float(item.lane_scores["dense"])
    vector = item_vector(item)
    if vector is None or query_vector is None:
        return None
    norm = float(np.linalg.norm(vector)) * float(np.linalg.norm(query_vector))
    return float(vector @ query_vector) / norm if norm > 0 else 0.0


def sufficiency(items: Sequence[RetrievedItem], query_vector: np.ndarray | None,
                floor: float = DEFAULT_ABSTAIN_FLOOR) -> tuple[float | None, str | None]:
    """(best dense cosine, reason to abstain or None). No measurable cosine never abstains."""
    cosines = [c for c in (dense_cosine(i, query_vector) for i in items if not is_graph_context(i)) if c is not None]
    if not items:
        return None, "no results"
    if not cosines:
        return None, None
    best = max(cosines)
    if best < floor:
        return best, f"best dense cosine {best:.3f} is below the sufficiency floor {floor:.2f}"
    return best, None


def lost_in_the_middle(items: Sequence[RetrievedItem]) -> list[RetrievedItem]:
    """Best items at both ends, weakest in the middle (Liu et al. 2023): ranks 1,3,5,...,6,4,2."""
    front = list(items[0::2])
    back = list(items[1::2])
    return front + back[::-1]


def is_graph_context(item: RetrievedItem) -> bool:
    return item.metadata.get("source") == GRAPH_SOURCE


@dataclass(frozen=True)
class Citation:
    """A passage as a reader cites it: its number in a context, where it comes from, and (for answers) an excerpt
    and its retrieval score. The one citation type of the API, the answers and the service."""

    number: int
    chunk_id: str
    document_id: str
    title: str = ""
    source_path: str = ""
    heading_path: tuple[str, ...] = ()
    start: int | None = None
    end: int | None = None
    excerpt: str = ""
    score: float = 0.0

    @classmethod
    def of(cls, item: RetrievedItem, number: int = 0, excerpt_chars: int = 0) -> Citation:
        """The citation of a retrieved item; ``excerpt_chars`` > 0 keeps that much of its text, whitespace folded."""
        flat = " ".join(item.text.split()) if excerpt_chars else ""
        meta = item.metadata
        return cls(number=number, chunk_id=item.chunk_id, document_id=item.document_id,
                   title=str(meta.get("title") or ""), source_path=str(meta.get("source_path") or ""),
                   heading_path=tuple(item.heading_path), start=meta.get("start"), end=meta.get("end"),
                   excerpt=flat[:excerpt_chars] + ("..." if len(flat) > excerpt_chars else ""),
                   score=round(float(item.score), 6))

    def where(self) -> str:
        """'Title > Heading (source, chars a-b)': where a reader finds the passage."""
        label = HEADING_SEPARATOR.join([self.title or self.document_id, *self.heading_path])
        span = f", chars {self.start}-{self.end}" if self.start is not None else ""
        return f"{label} ({self.source_path or self.document_id}{span})"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Citation:
        """A citation read back from JSON (the answer cache): lists become tuples again."""
        return cls(**{**data, "heading_path": tuple(data.get("heading_path") or ())})


def assemble_context(result: RetrievalResult | Sequence[RetrievedItem], token_budget: int,
                     count_tokens: Callable[[str], int] | None = None) -> tuple[str, list[Citation]]:
    """The items as numbered passages (``[1] Title > Heading\\ntext``) fitting ``token_budget`` tokens.

    Items are taken in result order; one that does not fit is skipped (never cut: a half passage makes its
    citation misleading) and smaller later ones may still fit. Numbers are contiguous; each citation maps its
    number to the chunk and document. ``count_tokens`` defaults to the embedding model's tokenizer.
    """
    if count_tokens is None:
        count_tokens = get_token_counter().count
    items = result.items if isinstance(result, RetrievalResult) else result
    blocks: list[str] = []
    citations: list[Citation] = []
    used = 0
    separator = 2  # the blank line between passages, a generous bound in any tokenizer
    for item in items:
        number = len(citations) + 1
        label = HEADING_SEPARATOR.join(item.heading_path) or item.metadata.get("title", "") or item.document_id
        block = f"[{number}] {label}\n{item.text.strip()}"
        cost = count_tokens(block) + (separator if blocks else 0)
        if used + cost > token_budget:
            continue
        used += cost
        blocks.append(block)
        citations.append(Citation.of(item, number))
    return "\n\n".join(blocks), citations
