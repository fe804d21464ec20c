"""Retrieval-quality evaluation: datasets, ranx metrics with bootstrap CIs, baselines, the runner and its report."""

from ragloom.evaluation.datasets import EvalDataset, Passage, Query, load_dataset
from ragloom.evaluation.metrics import (
    METRICS,
    Estimate,
    Hit,
    bootstrap_ci,
    document_ranking,
    document_scores,
    paired_difference_ci,
    passage_ranking,
    passage_scores,
    span_matches,
)
from ragloom.evaluation.report import EvalReport, SystemResult
from ragloom.evaluation.runner import evaluate

__all__ = [
    "METRICS",
    "Estimate",
    "EvalDataset",
    "EvalReport",
    "Hit",
    "Passage",
    "Query",
    "SystemResult",
    "bootstrap_ci",
    "document_ranking",
    "document_scores",
    "evaluate",
    "load_dataset",
    "paired_difference_ci",
    "passage_ranking",
    "passage_scores",
    "span_matches",
]

