"""`ragloom ingest`'s pieces that need no server: its options are the job's config (the run config it builds is
valid for ingest_job with the progress logger), the chunking options keep the settings consistent, one declaration
parses both doors, and the summary says what the materialization metadata says."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import dagster as dg
import pytest

from pipelines import ingest
from pipelines.definitions import defs
from ragloom.cli import build_parser as ragloom_parser
from ragloom.errors import ConfigError
from ragloom.settings import Settings


def test_the_run_config_of_every_option_is_valid_for_the_ingest_job(tmp_path):
    job = ingest.with_progress(defs.resolve_job_def("ingest_job"), lambda line: None, 0.0)
    for config in (ingest.run_config(), ingest.run_config(tmp_path, "acme/alice"), ingest.run_config(scope="")):
        assert dg.validate_run_config(job, config) is not None
    assert ingest.run_config(tmp_path, "acme")["resources"]["corpus"]["config"] == {"docs_dir": str(tmp_path),
                                                                              "docs_scope": "acme"}
    with pytest.raises(dg.DagsterInvalidConfigError):
        # the plain job has no progress logger to turn on
        dg.validate_run_config(defs.resolve_job_def("ingest_job"), ingest.run_config())


@pytest.mark.parametrize("chunkings, graph, expected", [
    ("headered", None, {"RAGLOOM_CHUNKINGS": "headered", "RAGLOOM_GRAPH_CHUNKINGS": "",
                        "RAGLOOM_SUMMARY_CHUNKINGS": ""}),
    ("headered, recursive", None, {"RAGLOOM_CHUNKINGS": "headered,recursive", "RAGLOOM_GRAPH_CHUNKINGS": "recursive",
                                   "RAGLOOM_SUMMARY_CHUNKINGS": ""}),
    (None, "", {"RAGLOOM_GRAPH_CHUNKINGS": ""}),
    (None, None, {}),
])
def test_chunking_options_keep_graph_chunkings_among_the_chunkings(chunkings, graph, expected):
    settings = dataclasses.replace(Settings(), chunkings=("recursive", "headered"), graph_chunkings=("recursive",))
    assert ingest.chunking_environment(settings, chunkings, graph) == expected


def test_no_chunking_at_all_is_refused():
    with pytest.raises(ConfigError, match="name at least one chunking"):
        ingest.chunking_environment(Settings(), " , ", None)


def test_both_doors_parse_the_command_line_with_one_declaration():
    argv = ["docs", "--chunkings", "headered", "--graph-chunkings", "", "--scope", "acme/alice", "--json"]
    core = vars(ragloom_parser().parse_args(["ingest", *argv]))
    dagster_layer = vars(ingest.build_parser().parse_args(argv))
    assert {k: core[k] for k in dagster_layer} == dagster_layer
    assert dagster_layer["path"] == Path("docs") and dagster_layer["graph_chunkings"] == ""


def test_the_summary_is_the_materialization_metadata():
    outcome = ingest.IngestOutcome("r1", False, 12.34, assets={
        "documents": {"documents": 7, "new": 5, "changed": 1, "unchanged": 1, "removed (tombstones)": 2, "rejected": 1},
        "chunks_headered": {"chunks": 40, "documents_chunked": 6, "documents_reused": 1, "chunk_seconds": 0.5},
        "vectors_headered": {"inserted": 30, "deleted": 4, "unchanged": 10, "collection_size": 40,
                             "collection": "RagloomHeadered", "embed_seconds": 1.0},
    }, failures=["graph_headered: Neo4j is down"], failed_checks=["no_rejected_files on documents (WARN)"])
    summary = outcome.summary()
    assert summary["documents"] == {"total": 7, "new": 5, "changed": 1, "unchanged": 1, "removed": 2, "rejected": 1}
    assert summary["chunks"] == {"headered": {"chunks": 40, "documents_chunked": 6, "documents_reused": 1}}
    assert summary["vectors"]["headered"]["collection"] == "RagloomHeadered" and summary["graph"] == {}
    text = ingest.format_summary(summary, "/home/dagster")
    assert text.splitlines()[0].startswith("ingest_job run r1: FAILURE in 12.3s")
    assert "documents  7: 5 new, 1 changed, 1 unchanged, 2 removed, 1 rejected" in text
    assert "vectors    headered: 30 inserted, 4 deleted, 10 unchanged, 40 collection size, in RagloomHeadered" in text
    assert "failed     graph_headered: Neo4j is down" in text


def test_the_corpus_resource_gives_the_documents_folder_its_scope(tmp_path):
    from ragloom.types import Scope
    from resources import CorpusResource

    docs, uploads = CorpusResource(docs_dir=str(tmp_path), docs_scope="acme/alice",
                                   uploads_dir=str(tmp_path / "up")).sources()
    assert (docs.root, docs.scope, docs.scope_from_path) == (tmp_path, Scope("acme", "alice"), False)
    assert uploads.scope is None and uploads.scope_from_path
    assert CorpusResource(docs_dir=str(tmp_path)).sources()[0].scope == Scope()
    with pytest.raises(ConfigError, match="RAGLOOM_DOCS_SCOPE"):
        CorpusResource(docs_dir=str(tmp_path), docs_scope="acme//x").sources()
