"""An evaluation's results: per-query scores per system and level, CIs, differences from the baselines; table,
CSV, JSON and a PNG chart."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragloom.errors import ConfigError
from ragloom.evaluation.metrics import METRICS, Estimate, PerQuery, bootstrap_ci, level_metrics, paired_difference_ci
from ragloom.retrieval.routing.monitor import describe

BASELINE_BM25 = "bm25"
BASELINE_DENSE = "dense"
CHART_METRICS = ("ndcg@10", "recall@10")


@dataclass
class SystemResult:
    """One retrieval strategy on one chunking (or a baseline on its units) and its per-query scores."""

    retrieval: str
    chunking: str  # a chunking, or the baseline's unit (document / paragraph)
    baseline: bool = False
    scores: dict[str, PerQuery] = field(default_factory=dict)  # level -> metric -> per-query scores
    latency_ms: list[float] = field(default_factory=list)
    query_errors: int = 0
    error: str = ""  # set when the system could not run at all
    adaptive: dict[str, Any] | None = None  # adaptive's mix and retries (ragloom.retrieval.routing.monitor)

    @property
    def name(self) -> str:
        return f"baseline:{self.retrieval}/{self.chunking}" if self.baseline else f"{self.retrieval}/{self.chunking}"


@dataclass
class EvalReport:
    dataset: str
    levels: list[str]  # "document", and "passage" for datasets with gold passages
    query_ids: dict[str, list[str]]  # level -> the query ids the score arrays are aligned with
    systems: list[SystemResult]
    documents: int = 0
    config: dict[str, Any] = field(default_factory=dict)
    ingest: dict[str, dict[str, Any]] = field(default_factory=dict)  # chunking -> counts and seconds
    resamples: int = 1000
    seed: int = 0

    # numbers ------------------------------------------------------------------------------------------
    def baseline(self, retrieval: str) -> SystemResult | None:
        return next((s for s in self.systems if s.baseline and s.retrieval == retrieval and not s.error), None)

    def estimate(self, system: SystemResult, level: str, metric: str) -> Estimate:
        return bootstrap_ci(system.scores[level][metric], self.resamples, self.seed)

    def difference(self, system: SystemResult, level: str, metric: str, baseline: str) -> Estimate | None:
        base = self.baseline(baseline)
        if base is None or base is system or level not in base.scores:
            return None
        return paired_difference_ci(system.scores[level][metric], base.scores[level][metric],
                                    self.resamples, self.seed)

    def compare(self, name: str, other: str, level: str, metric: str) -> Estimate:
        """Paired difference ``name - other`` (system names as in the table), e.g. graph_rag vs hybrid."""
        systems = {s.name: s for s in self.systems if not s.error}
        missing = [n for n in (name, other) if n not in systems]
        if missing:
            raise ConfigError(f"no scores for {missing}; systems: {', '.join(systems)}")
        return paired_difference_ci(systems[name].scores[level][metric], systems[other].scores[level][metric],
                                    self.resamples, self.seed)

    def rows(self) -> list[dict[str, Any]]:
        """One row per system, level and metric: mean and CI, and the paired difference from each baseline."""
        out = []
        for system in self.systems:
            if system.error:
                out.append({"system": system.name, "retrieval": system.retrieval, "chunking": system.chunking,
                            "baseline": system.baseline, "error": system.error})
                continue
            for level in self.levels:
                for metric in level_metrics(level):
                    est = self.estimate(system, level, metric)
                    row: dict[str, Any] = {
                        "system": system.name, "retrieval": system.retrieval, "chunking": system.chunking,
                        "baseline": system.baseline, "level": level, "metric": metric,
                        "mean": est.mean, "low": est.low, "high": est.high, "queries": len(self.query_ids[level]),
                        "latency_ms_median": float(np.median(system.latency_ms)) if system.latency_ms else None,
                        "query_errors": system.query_errors, "error": "",
                    }
                    for base in (BASELINE_BM25, BASELINE_DENSE):
                        diff = self.difference(system, level, metric, base)
                        row[f"delta_{base}"] = None if diff is None else diff.mean
                        row[f"delta_{base}_low"] = None if diff is None else diff.low
                        row[f"delta_{base}_high"] = None if diff is None else diff.high
                    out.append(row)
        return out

    # renderings ---------------------------------------------------------------------------------------
    def table(self) -> str:
        """A fixed-width table per level: metrics with 95% CI, and nDCG@10 / recall@10 differences."""
        rows = self.rows()
        lines = [f"dataset {self.dataset}: {self.documents} documents, "
                 + ", ".join(f"{len(self.query_ids[lv])} queries ({lv})" for lv in self.levels)]
        for level in self.levels:
            lines.append(f"\n{level} level (mean [95% CI]; delta = paired difference from the baseline [95% CI])")
            metrics = level_metrics(level)
            header = f"{'system':34} " + " ".join(f"{m:>19}" for m in metrics) + \
                f" {'dnDCG vs bm25':>22} {'dnDCG vs dense':>22} {'dR@10 vs bm25':>22} {'dR@10 vs dense':>22} {'ms':>6}"
            lines += [header, "-" * len(header)]
            for system in self.systems:
                if system.error:
                    lines.append(f"{system.name:34} error: {system.error}")
                    continue
                cells = {r["metric"]: r for r in rows if r["system"] == system.name and r.get("level") == level}
                text = f"{system.name:34} " + " ".join(
                    f"{cells[m]['mean']:.3f} [{cells[m]['low']:.3f},{cells[m]['high']:.3f}]" for m in metrics)
                for metric, base in (("ndcg@10", "bm25"), ("ndcg@10", "dense"),
                                     ("recall@10", "bm25"), ("recall@10", "dense")):
                    r = cells[metric]
                    text += " " + (f"{'-':>22}" if r[f"delta_{base}"] is None else
                                   f"{r[f'delta_{base}']:+.3f} [{r[f'delta_{base}_low']:+.3f},"
                                   f"{r[f'delta_{base}_high']:+.3f}]")
                latency = cells[METRICS[0]]["latency_ms_median"]
                text += f" {latency:6.0f}" if latency is not None else f" {'-':>6}"
                if system.query_errors:
                    text += f"  ({system.query_errors} query errors)"
                lines.append(text)
        lines += self.adaptive_lines()
        return "\n".join(lines)

    def adaptive_lines(self) -> list[str]:
        """One line per adaptive system: the strategy mix, retry rate and how often the retry improved nDCG@10."""

        systems = [s for s in self.systems if s.adaptive]
        return ["", "adaptive routing (retry judged by document nDCG@10 of the returned try vs the first)"] + [
            f"{s.name}: {describe(s.adaptive)}" for s in systems] if systems else []

    def markdown(self) -> str:
        """The table as Markdown (for Dagster metadata or a note): mean [CI] per metric, nDCG@10 deltas."""
        rows = self.rows()
        lines = []
        for level in self.levels:
            metrics = level_metrics(level)
            lines += [f"**{self.dataset}, {level} level** ({len(self.query_ids[level])} queries)", "",
                      "| system | " + " | ".join(metrics) + " | ΔnDCG@10 vs bm25 | ΔnDCG@10 vs dense |",
                      "| --- |" + " --- |" * (len(metrics) + 2)]
            for system in self.systems:
                if system.error:
                    lines.append(f"| {system.name} | error: {system.error} |" + " |" * (len(metrics) + 1))
                    continue
                cells = {r["metric"]: r for r in rows if r["system"] == system.name and r.get("level") == level}
                deltas = [cells["ndcg@10"][f"delta_{b}"] for b in (BASELINE_BM25, BASELINE_DENSE)]
                lines.append(f"| {system.name} | " + " | ".join(
                    f"{cells[m]['mean']:.3f} [{cells[m]['low']:.3f}, {cells[m]['high']:.3f}]" for m in metrics)
                    + " | " + " | ".join("-" if d is None else f"{d:+.3f}" for d in deltas) + " |")
            lines.append("")
        adaptive = self.adaptive_lines()
        if adaptive:
            lines += [f"**{adaptive[1]}**", "", *(f"- {line}" for line in adaptive[2:]), ""]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset, "documents": self.documents, "levels": self.levels,
            "config": self.config, "ingest": self.ingest, "resamples": self.resamples, "seed": self.seed,
            "rows": self.rows(),
            "adaptive": {s.name: s.adaptive for s in self.systems if s.adaptive},
            "per_query": {s.name: {lv: {"query_ids": self.query_ids[lv],
                                        **{m: [round(float(v), 6) for v in s.scores[lv][m]] for m in level_metrics(lv)}}
                                   for lv in s.scores} for s in self.systems if not s.error},
        }

    def write(self, out_dir: str | Path) -> dict[str, Path]:
        """``<dataset>_eval.csv``, ``.json``, ``.txt`` and ``.png`` in ``out_dir``; returns their paths."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {kind: out / f"{self.dataset}_eval.{kind}" for kind in ("csv", "json", "txt", "png")}
        rows = self.rows()
        columns = list(dict.fromkeys(k for r in rows for k in r))
        with paths["csv"].open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
        paths["json"].write_text(json.dumps(self.to_json(), indent=1, default=str), encoding="utf-8")
        paths["txt"].write_text(self.table() + "\n", encoding="utf-8")
        self.chart(paths["png"])
        return paths

    def chart(self, path: Path) -> None:
        """Bars of nDCG@10 and recall@10 per system, one panel per level, with 95% CI error bars."""
        import matplotlib

        matplotlib.use("Agg")  # no display on servers
        import matplotlib.pyplot as plt

        systems = [s for s in self.systems if not s.error]
        size = (max(6.0, 0.9 * len(systems) + 2), 3.6 * len(self.levels))
        fig, axes = plt.subplots(len(self.levels), 1, figsize=size, squeeze=False)
        width = 0.8 / len(CHART_METRICS)
        x = np.arange(len(systems))
        for ax, level in zip(axes[:, 0], self.levels, strict=True):
            for i, metric in enumerate(CHART_METRICS):
                ests = [self.estimate(s, level, metric) for s in systems]
                means = np.array([e.mean for e in ests])
                err = np.array([[e.mean - e.low for e in ests], [e.high - e.mean for e in ests]])
                ax.bar(x + (i - (len(CHART_METRICS) - 1) / 2) * width, means, width, yerr=err, capsize=3, label=metric)
            ax.set_xticks(x, [s.name for s in systems], rotation=30, ha="right", fontsize=8)
            ax.set_ylim(0, 1)
            ax.set_title(f"{self.dataset}: {level} level (95% bootstrap CI)")
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
