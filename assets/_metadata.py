"""Metadata helpers shared by the assets: Markdown tables and small PNG charts for the UI."""


import base64
import io
from collections.abc import Sequence
from typing import Any

from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue

from ragloom.quality import SuiteOutcome


def markdown_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], limit: int = 20) -> MetadataValue:
    if not rows:
        return MetadataValue.md("_none_")
    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")[:160]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c, "")) for c in columns) + " |" for r in rows[:limit]]
    if len(rows) > limit:
        lines.append(f"\n_{len(rows) - limit} more not shown_")
    return MetadataValue.md("\n".join(lines))


def histogram_png(values: Sequence[float], title: str, xlabel: str, bins: int = 30) -> MetadataValue:
    """A histogram embedded as a base64 PNG in Markdown (the UI renders it inline)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 2.6), dpi=90)
    ax.hist(list(values), bins=bins, color="#4f46e5")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_ylabel("count", fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return MetadataValue.md(f"![{title}](data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()})")


def suite_check(outcome: SuiteOutcome, **metadata: Any) -> AssetCheckResult:
    """An ERROR-severity check result from a Great Expectations suite: counts per rule, failures with examples."""
    return AssetCheckResult(passed=outcome.success, severity=AssetCheckSeverity.ERROR,
                            metadata={**outcome.as_metadata(), **metadata,
                                      "failures": markdown_table([o.__dict__ for o in outcome.failed()],
                                                                 ["name", "unexpected_count", "examples"])})
