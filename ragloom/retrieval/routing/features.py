"""Per-query features for routing: the query's form, and cheap retrieval signals from one dense and one BM25
lane query (10 candidates each). No model but the embedder the search needs anyway.

``FEATURE_VERSION`` changes whenever a feature is added, removed or computed differently: a router model
trained on another version is refused at load time.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

FEATURE_VERSION = 1
SIGNAL_K = 10
WH_WORDS = ("what", "who", "when", "where", "which", "how", "why")
_AUX = {"is", "are", "was", "were", "do", "does", "did", "can", "could", "should", "has", "have", "will", "would"}
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")
_CODE = re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])\w[\w-]*|\b\d+(?:\.\d+)+")  # p53, IL-6, or 1.2.3
STOPWORDS = frozenset(
    "a an the of in on at to for from by with and or not no is are was were be been being do does did can could "
    "should would will shall may might must has have had what who whom whose when where which how why that this "
    "these those it its as into than then there their they them he she his her we our you your i me my "
    "about over under between during after before".split())

FORM_NAMES = (  # from the query's text alone (all the rules read)
    "tokens", "chars_per_token", "question_mark", *(f"wh_{w}" for w in WH_WORDS), "starts_aux", "digits",
    "codes", "capitalized", "content_terms",
)
FEATURE_NAMES = (
    *FORM_NAMES,
    "dense_top1", "dense_margin", "dense_spread", "bm25_top1_log", "bm25_margin_rel", "agreement_jaccard",
    "top1_agree", "dense_docs", "bm25_docs",
)


def content_terms(text: str) -> list[str]:
    """The query's words without stopwords, lower-cased (also what the quality check's coverage counts)."""
    return [w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in STOPWORDS and len(w) > 1]


def query_form(query: str) -> list[float]:
    words = [m.group(0) for m in _WORD.finditer(query)]
    first = words[0].lower() if words else ""
    wh = [float(any(w.lower() == word for w in words[:3])) for word in WH_WORDS]
    # capitalized words not at the start: a cheap stand-in for named entities (no spaCy on the query path)
    capitalized = sum(1 for w in words[1:] if w[:1].isupper())
    return [
        float(len(words)), (len(query) / len(words)) if words else 0.0, float(query.rstrip().endswith("?")), *wh,
        float(first in _AUX), float(sum(c.isdigit() for c in query)), float(len(_CODE.findall(query))),
        float(capitalized), float(len(content_terms(query))),
    ]


def retrieval_signals(dense: list[Any], bm25: list[Any]) -> list[float]:
    """From the two lanes' ranked items (best first): dense cosines, BM25 scores, and how much they agree."""
    d = [float(i.score) for i in dense]
    b = [float(i.score) for i in bm25]
    d_ids = [i.chunk_id for i in dense[:SIGNAL_K]]
    b_ids = [i.chunk_id for i in bm25[:SIGNAL_K]]
    union = set(d_ids) | set(b_ids)
    return [
        d[0] if d else 0.0,
        d[0] - d[1] if len(d) > 1 else 0.0,
        d[0] - float(np.mean(d)) if d else 0.0,
        math.log1p(b[0]) if b else 0.0,
        (b[0] - b[1]) / b[0] if len(b) > 1 and b[0] > 0 else 0.0,
        len(set(d_ids) & set(b_ids)) / len(union) if union else 0.0,
        float(bool(d_ids and b_ids and d_ids[0] == b_ids[0])),
        len({i.document_id for i in dense[:SIGNAL_K]}) / SIGNAL_K,
        len({i.document_id for i in bm25[:SIGNAL_K]}) / SIGNAL_K,
    ]


def features(query: str, dense: list[Any], bm25: list[Any]) -> np.ndarray:
    """The feature vector (``FEATURE_NAMES`` order) of one query and its two lanes' candidates."""
    return np.asarray([*query_form(query), *retrieval_signals(dense, bm25)], dtype=np.float64)


def named(vector: np.ndarray) -> dict[str, float]:
    return {name: round(float(v), 4) for name, v in zip(FEATURE_NAMES, vector, strict=True)}
