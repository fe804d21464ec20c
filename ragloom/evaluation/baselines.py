"""The reference retrievers every strategy is compared with: BM25 (bm25s) and dense (numpy) over whole units.

A unit is a whole document, or for long structured documents (datasets with gold passages) a paragraph
(a blank-line separated block), so the baselines need no chunker and no store.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ragloom.errors import ConfigError
from ragloom.evaluation.datasets import EvalDataset, Query
from ragloom.evaluation.metrics import Hit
from ragloom.types import Document

_BLANK_LINE = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True)
class Unit:
    unit_id: str
    document_id: str
    start: int
    end: int
    text: str  # what is indexed (the title is put in front of whole documents, as BEIR does)


def document_units(documents: Sequence[Document]) -> list[Unit]:
    return [Unit(d.document_id, d.document_id, 0, len(d.text), f"{d.title}\n{d.text}" if d.title else d.text)
            for d in documents]


def paragraph_units(documents: Sequence[Document]) -> list[Unit]:
    """Blank-line separated blocks with exact offsets into ``Document.text``."""
    units = []
    for d in documents:
        cursor = 0
        for match in [*_BLANK_LINE.finditer(d.text), None]:
            end = len(d.text) if match is None else match.start()
            start, stop = cursor, end
            while start < stop and d.text[start].isspace():
                start += 1
            while stop > start and d.text[stop - 1].isspace():
                stop -= 1
            if start < stop:
                units.append(Unit(f"{d.document_id}@{start}", d.document_id, start, stop, d.text[start:stop]))
            cursor = len(d.text) if match is None else match.end()
    return units


def baseline_units(dataset: EvalDataset) -> tuple[str, list[Unit]]:
    """("paragraph", ...) for datasets scored on passages, else ("document", ...)."""
    if dataset.has_passages:
        return "paragraph", paragraph_units(dataset.documents)
    return "document", document_units(dataset.documents)


class BM25Baseline:
    """bm25s (Lucene BM25, English stopwords, no stemmer) over the units."""

    def __init__(self, units: Sequence[Unit]) -> None:
        import bm25s

        if not units:
            raise ConfigError("BM25 baseline over zero units")
        self.units = list(units)
        self._bm25s = bm25s
        self._index = bm25s.BM25()
        self._index.index(bm25s.tokenize([u.text for u in self.units], stopwords="en", show_progress=False),
                          show_progress=False)

    def search(self, queries: Sequence[Query], k: int) -> dict[str, list[Hit]]:
        tokens = self._bm25s.tokenize([q.text for q in queries], stopwords="en", show_progress=False)
        ids, scores = self._index.retrieve(tokens, k=min(k, len(self.units)), show_progress=False)
        out = {}
        for q, row, row_scores in zip(queries, ids, scores, strict=True):
            # bm25s pads with zero-score results when fewer units match: those are not retrieved
            out[q.query_id] = [_hit(self.units[int(i)]) for i, s in zip(row, row_scores, strict=True) if s > 0]
        return out


class DenseBaseline:
    """Exact cosine search in numpy with the same embedder ragloom uses (vectors are unit length)."""

    def __init__(self, units: Sequence[Unit], encode: Callable[[Sequence[str]], np.ndarray]) -> None:
        if not units:
            raise ConfigError("dense baseline over zero units")
        self.units = list(units)
        self._encode = encode
        self._matrix = np.asarray(encode([u.text for u in self.units]), dtype=np.float32)

    def search(self, queries: Sequence[Query], k: int) -> dict[str, list[Hit]]:
        vectors = np.asarray(self._encode([q.text for q in queries]), dtype=np.float32)
        sims = vectors @ self._matrix.T
        k = min(k, len(self.units))
        out = {}
        for q, row in zip(queries, sims, strict=True):
            top = np.argpartition(-row, k - 1)[:k]
            top = top[np.argsort(-row[top], kind="stable")]
            out[q.query_id] = [_hit(self.units[int(i)]) for i in top]
        return out


def _hit(unit: Unit) -> Hit:
    return Hit(unit.unit_id, unit.document_id, unit.start, unit.end)
