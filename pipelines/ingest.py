"""`ragloom ingest`: the ingest job run once, in this process, on the Dagster instance the UI reads; a line per asset
as it materializes, then a summary taken from the run's materialization metadata.

    ragloom ingest [PATH] [--chunkings A,B] [--graph-chunkings A] [--scope TENANT/USER] [--json]
    python -m pipelines.ingest [the same]          (what scripts/demo calls)

Where it lives: the core never imports dagster (import-linter's contract "the core never imports dagster"), so the
`ingest` subcommand of ragloom/cli.py only declares the options (add_ingest_arguments: `--help` and the CLI
reference need no Dagster) and checks them, then runs `python -m pipelines.ingest` with the same arguments as a
child process (the core names this module as a string, never imports it) and exits with the child's exit code.
This module parses them with that same declaration and runs the job.

The options are the job's own configuration: PATH and --scope are the `corpus` resource's `docs_dir` and
`docs_scope`, given as run config the way the Launchpad gives them; --chunkings and --graph-chunkings are
RAGLOOM_CHUNKINGS and RAGLOOM_GRAPH_CHUNKINGS, set in this process before the code location is built, because
they shape the asset graph. The run is recorded in the instance of DAGSTER_HOME (`source scripts/dagster-home.sh`:
the one `dagster dev` and scripts/demo use), so it is listed in the UI with its events and metadata. Dagster's
Python API (`execute_in_process`), not `dagster job execute`, which current Dagster marks as superseded; the steps
run in this process whatever RAGLOOM_EXECUTOR says.

Progress lines go to stderr, the summary to stdout. Exit codes: 0 the run succeeded; 1 it ran and failed (each
failed step and its error are printed); 2 nothing ran (a bad option, a missing folder, no DAGSTER_HOME).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagster import DagsterEventType, DagsterInstance, logger

from ragloom.cli import INGEST_DESCRIPTION, add_ingest_arguments
from ragloom.errors import ConfigError, RagloomError
from ragloom.settings import Settings
from ragloom.types import Scope
from resources import CorpusResource, settings_of

Show = Callable[[str], None]
PROGRESS_LOGGER = "ragloom_progress"


@dataclass
class IngestOutcome:
    """One run of the ingest job: its id and status, each asset's materialization metadata (plain values), the
    failed steps with their errors, and the asset checks that did not pass."""

    run_id: str
    success: bool
    seconds: float
    assets: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    failed_checks: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The figures a person checks after a run: documents, chunks, vectors and graph, per chunking."""
        docs = self.assets.get("documents", {})
        out: dict[str, Any] = {
            "run_id": self.run_id, "status": "SUCCESS" if self.success else "FAILURE",
            "seconds": round(self.seconds, 1),
            "documents": {key: docs.get(name, 0) for key, name in _DOCUMENT_FIGURES.items()} if docs else {},
            "chunks": {}, "vectors": {}, "graph": {}, "summaries": {},
            "failures": self.failures, "failed_checks": self.failed_checks,
        }
        for asset, meta in self.assets.items():
            kind, _, chunking = asset.partition("_")
            if kind in _FIGURES and chunking:
                out[_FIGURES[kind][0]][chunking] = {k: meta[k] for k in _FIGURES[kind][1] if k in meta}
        return out


# documents' materialization metadata: summary name -> metadata name (assets/documents.py)
_DOCUMENT_FIGURES = {"total": "documents", "new": "new", "changed": "changed", "unchanged": "unchanged",
                     "removed": "removed (tombstones)", "rejected": "rejected"}
# asset name prefix -> (summary section, metadata keys shown) (assets/chunks.py, stores.py, summaries.py)
_FIGURES = {
    "chunks": ("chunks", ("chunks", "documents_chunked", "documents_reused")),
    "vectors": ("vectors", ("inserted", "deleted", "unchanged", "collection_size", "collection")),
    "graph": ("graph", ("chunks_added", "chunks_removed", "entities", "relations", "mentions")),
    "summaries": ("summaries", ("sections", "built", "reused")),
}


def format_summary(summary: Mapping[str, Any], home: str) -> str:
    """The summary as a few lines of text."""
    lines = [f"ingest_job run {summary['run_id']}: {summary['status']} in {summary['seconds']}s "
             f"(Dagster instance {home}: the UI lists it under Runs)"]
    docs = summary["documents"]
    if docs:
        lines.append(f"documents  {docs['total']}: {docs['new']} new, {docs['changed']} changed, {docs['unchanged']} "
                     f"unchanged, {docs['removed']} removed, {docs['rejected']} rejected")
    for section in ("chunks", "vectors", "graph", "summaries"):
        for chunking, figures in summary[section].items():
            shown = ", ".join(f"{v} {k.replace('_', ' ')}" if k != "collection" else f"in {v}"
                              for k, v in figures.items())
            lines.append(f"{section:<10} {chunking}: {shown}")
    lines += [f"failed     {f}" for f in summary["failures"]]
    lines += [f"check      {c}" for c in summary["failed_checks"]]
    return "\n".join(lines)


def _progress_line(asset: str, meta: Mapping[str, Any]) -> str:
    kind = asset.partition("_")[0]
    if asset == "documents":
        figures = {k: meta.get(v, 0) for k, v in _DOCUMENT_FIGURES.items()}
        shown = f"{figures.pop('total')} documents (" + ", ".join(f"{v} {k}" for k, v in figures.items()) + ")"
    elif kind in _FIGURES:
        shown = ", ".join(f"{meta[k]} {k.replace('_', ' ')}" for k in _FIGURES[kind][1] if k in meta
                          and k != "collection")
    else:
        shown = "materialized"
    return f"{asset}: {shown}"


class _ProgressHandler(logging.Handler):
    """Turns the run's events into progress lines: an asset materialized, a step failed or is retried, an asset
    check did not pass; and the steps' own warnings (a rejected file, say)."""

    def __init__(self, show: Show, started: float) -> None:
        super().__init__(logging.DEBUG)  # Dagster logs its events at DEBUG
        self.show, self.started = show, started

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "dagster_meta", None) or {}
        event = meta.get("dagster_event")
        line = None
        if event is None:
            if record.levelno >= logging.WARNING and meta.get("step_key"):
                line = f"{meta['step_key']}: {meta.get('orig_message', record.getMessage())}"
        elif event.event_type == DagsterEventType.ASSET_MATERIALIZATION:
            materialization = event.event_specific_data.materialization
            line = _progress_line(materialization.asset_key.to_user_string(),
                                  {k: v.value for k, v in materialization.metadata.items()})
        elif event.event_type == DagsterEventType.STEP_FAILURE:
            line = f"FAILED {event.step_key}: {_reason(event.event_specific_data.error)}"
        elif event.event_type == DagsterEventType.STEP_UP_FOR_RETRY:
            line = f"{event.step_key}: retrying ({_reason(event.event_specific_data.error)})"
        elif event.event_type == DagsterEventType.ASSET_CHECK_EVALUATION:
            evaluation = event.event_specific_data
            if not evaluation.passed:
                line = f"check {_check(evaluation)} did not pass"
        if line:
            self.show(f"[{time.monotonic() - self.started:6.1f}s] {line}")


def _reason(error: Any) -> str:
    """A step error's message and, when it wraps another, the innermost one's (the user's code raised that)."""
    if error is None:
        return "no error recorded"
    inner = error
    while getattr(inner, "cause", None) is not None:
        inner = inner.cause
    first = (error.message or "").strip().splitlines()[0] if error.message else error.cls_name
    if inner is error:
        return first
    return f"{first}; caused by {inner.cls_name}: {(inner.message or '').strip().splitlines()[0]}"


def _check(evaluation: Any) -> str:
    severity = getattr(evaluation.severity, "value", evaluation.severity)
    return f"{evaluation.check_name} on {evaluation.asset_key.to_user_string()} ({severity})"


def with_progress(job: Any, show: Show, started: float) -> Any:
    """``job`` with the progress lines as its only logger (``run_config`` turns it on)."""

    @logger(description="progress lines of `ragloom ingest`")
    def progress(_context):
        log = logging.Logger("ragloom.ingest", logging.DEBUG)
        log.addHandler(_ProgressHandler(show, started))
        return log

    return job.with_logger_defs({PROGRESS_LOGGER: progress})


def _names(value: str) -> list[str]:
    return [n.strip() for n in value.split(",") if n.strip()]


def chunking_environment(settings: Settings, chunkings: str | None, graph_chunkings: str | None) -> dict[str, str]:
    """RAGLOOM_* variables for --chunkings / --graph-chunkings. Without --graph-chunkings, the graph (and the
    summaries) keep those of their configured chunkings that are still materialized."""
    env: dict[str, str] = {}
    if chunkings is not None:
        chosen = _names(chunkings)
        if not chosen:
            raise ConfigError("--chunkings: name at least one chunking, e.g. --chunkings recursive,headered")
        env["RAGLOOM_CHUNKINGS"] = ",".join(chosen)
        env["RAGLOOM_GRAPH_CHUNKINGS"] = ",".join(n for n in settings.graph_chunkings if n in chosen)
        env["RAGLOOM_SUMMARY_CHUNKINGS"] = ",".join(n for n in settings.summary_chunkings if n in chosen)
    if graph_chunkings is not None:
        env["RAGLOOM_GRAPH_CHUNKINGS"] = ",".join(_names(graph_chunkings))
    return env


def run_config(path: Path | None = None, scope: str | None = None) -> dict[str, Any]:
    """The run config of the options, as the Launchpad would give it, with the progress lines as the run's logger
    (in place of Dagster's console logger, which prints every event of every step)."""
    corpus = {k: v for k, v in (("docs_dir", None if path is None else str(path)), ("docs_scope", scope))
              if v is not None}
    return {"loggers": {PROGRESS_LOGGER: {}}} | ({"resources": {"corpus": {"config": corpus}}} if corpus else {})


def ingest(path: Path | None = None, scope: str | None = None, show: Show | None = None) -> IngestOutcome:
    """Runs ingest_job once against the instance in DAGSTER_HOME; ``show`` gets a progress line per event worth
    one. Bad options raise ConfigError before any run exists."""
    if not os.environ.get("DAGSTER_HOME"):
        raise ConfigError("DAGSTER_HOME is not set: `source scripts/dagster-home.sh` first, so that the run is "
                          "recorded in the instance the UI reads")
    if path is not None and not path.is_dir():
        raise ConfigError(f"{path}: not a folder (PATH is the documents folder)")
    if scope is not None:
        Scope.from_path(scope)  # a ScopeError names the bad part
    # every setting checked, with the options' overrides, before anything runs
    settings = settings_of(CorpusResource(docs_dir=None if path is None else str(path), docs_scope=scope))
    # deferred: importing the module builds the code location from the environment, which main() set first
    from pipelines.definitions import build_defs

    started = time.monotonic()
    # built from these settings, not the module's `defs`: an earlier import in this process may have seen other ones
    job = with_progress(build_defs(settings).resolve_job_def("ingest_job"),
                        show or (lambda line: print(line, file=sys.stderr)), started)
    with DagsterInstance.get() as instance:
        result = job.execute_in_process(run_config=run_config(path, scope), instance=instance, raise_on_error=False)
    outcome = IngestOutcome(result.run_id, result.success, time.monotonic() - started)
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        outcome.assets[materialization.asset_key.to_user_string()] = {
            k: v.value for k, v in materialization.metadata.items()}
    outcome.failures = [f"{e.step_key}: {_reason(e.event_specific_data.error)}"
                        for e in result.get_step_failure_events()]
    outcome.failed_checks = [_check(c) for c in result.get_asset_check_evaluations() if not c.passed]
    return outcome


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragloom ingest", description=INGEST_DESCRIPTION)
    add_ingest_arguments(parser)
    return parser


def main(argv: Iterable[str] | None = None) -> int:
    args = build_parser().parse_args(None if argv is None else list(argv))
    try:
        os.environ.update(chunking_environment(Settings.from_env(), args.chunkings, args.graph_chunkings))
        outcome = ingest(None if args.path is None else args.path.resolve(), args.scope)
    except RagloomError as e:
        print(f"ragloom ingest: error: {e}", file=sys.stderr)
        return 2
    summary = outcome.summary()
    print(json.dumps(summary, indent=2, default=str) if args.json
          else format_summary(summary, os.environ["DAGSTER_HOME"]))
    return 0 if outcome.success else 1


if __name__ == "__main__":
    sys.exit(main())
