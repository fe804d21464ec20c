"""The demo's ingest (`ragloom ingest`, i.e. pipelines.ingest) runs without deprecation or supersession warnings
from our calls: pyproject.toml ignores every DeprecationWarning, so this test records them all itself. Then the
demo's own line for the Word file's hit, taken from scripts/demo, prints that one hit."""

from __future__ import annotations

import os
import re
import subprocess
import warnings
from pathlib import Path

from ragloom.settings import REPO_ROOT, SAMPLE_CORPUS

# Where a warning caused by our use of an API is attributed: our own modules, or Dagster's (its deprecations
# name the method we, or a Dagster code path our definitions chose, called).
OURS = tuple(str(REPO_ROOT / d) for d in ("ragloom", "assets", "resources", "pipelines"))
DAGSTER = ("/dagster/", "/dagster_shared/")


def _ours(w: warnings.WarningMessage) -> bool:
    kind = w.category.__name__
    deprecation = issubclass(w.category, DeprecationWarning | PendingDeprecationWarning) or kind in (
        "SupersessionWarning", "BetaWarning", "PreviewWarning")
    return (deprecation and (w.filename.startswith(OURS) or any(d in w.filename for d in DAGSTER))) \
        or "dagster_run" in str(w.message)


def test_demo_ingest_is_quiet(monkeypatch, tmp_path: Path, namespace, weaviate_store_factory, neo4j_store_factory):
    weaviate_store_factory(namespace), neo4j_store_factory(namespace)  # dropped after the test
    for name, value in {"RAGLOOM_COLLECTION_PREFIX": namespace, "RAGLOOM_GRAPH_NAMESPACE": namespace,
                        "RAGLOOM_DOCS_DIR": str(SAMPLE_CORPUS), "RAGLOOM_UPLOADS_DIR": str(tmp_path / "uploads"),
                        "RAGLOOM_ARTIFACTS_DIR": str(tmp_path / "artifacts"),
                        "RAGLOOM_CHUNKINGS": "recursive,headered", "RAGLOOM_SUMMARY_CHUNKINGS": "",
                        "DAGSTER_HOME": str(tmp_path / "dagster")}.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "dagster").mkdir()
    from pipelines.ingest import ingest

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # overrides pyproject's ignore::DeprecationWarning for this block
        outcome = ingest(show=lambda line: None)
    assert outcome.success, outcome.failures
    ours = [f"{w.category.__name__}: {str(w.message)[:160]} ({w.filename}:{w.lineno})" for w in caught if _ours(w)]
    assert not ours, "warnings from our calls:\n" + "\n".join(ours)

    # the demo's Word-file line, as scripts/demo has it (a `ragloom query` continued on the next line)
    demo = (REPO_ROOT / "scripts" / "demo").read_text()
    (command,) = re.findall(r"^ragloom query [^\n]*author[^\n]*$|^ragloom query [^\n]*\\\n[^\n]*author[^\n]*$", demo,
                            re.MULTILINE)
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command], env=dict(os.environ), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert "docs/reports/quarterly_review_q3_2024.docx" in line and line.lstrip().startswith("1. ["), line


def test_the_filter_sees_dagsters_deprecation() -> None:
    """The check above would catch the warning this change removed (InitResourceContext.dagster_run)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn_explicit("InitResourceContext.dagster_run is deprecated", DeprecationWarning,
                               "/venv/lib/python3.11/site-packages/dagster/_core/execution/context/init.py", 133)
        warnings.warn_explicit("unrelated", DeprecationWarning, "/venv/site-packages/somelib/x.py", 1)
    assert [_ours(w) for w in caught] == [True, False]
