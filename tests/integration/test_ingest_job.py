"""The ingestion job end to end on the sample corpus, against the real Weaviate and Neo4j.

Run, re-run (nothing written), edit one document (only it is re-chunked and re-written), delete one
(its chunks leave both stores); every asset check passes at every step.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from mixed_folder import make_musique_folder

from pipelines.definitions import build_defs
from ragloom.settings import SAMPLE_CORPUS, Settings
from resources import NlpResource, default_resources


def _defs(settings: Settings, namespace: str, work: Path, nlp: NlpResource | None = None):
    """The repo's Definitions on ``work``/docs, in this test's collections and graph namespace."""
    resources = default_resources(work, collection_prefix=namespace, graph_namespace=namespace)
    return build_defs(settings, {**resources, "nlp": nlp or NlpResource()})


def _run(defs):
    result = defs.resolve_job_def("ingest_job").execute_in_process(raise_on_error=True)
    assert result.success
    checks = result.get_asset_check_evaluations()
    failed = [(c.asset_check_key.name, c.metadata) for c in checks if not c.passed]
    assert not failed, failed
    return {m.asset_key.to_user_string(): {k: v.value for k, v in m.metadata.items()}
            for m in result.get_asset_materialization_events() and
            [e.event_specific_data.materialization for e in result.get_asset_materialization_events()]}


@pytest.fixture
def corpus(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLE_CORPUS, docs)
    return docs


def test_ingest_rerun_edit_delete(settings, weaviate_store_factory, neo4j_store_factory, namespace, tmp_path, corpus):
    defs = _defs(settings, namespace, tmp_path)
    wv, graph = weaviate_store_factory(namespace), neo4j_store_factory(namespace)
    first = _run(defs)
    documents = first["documents"]["documents"]
    assert documents >= 8 and first["documents"]["rejected"] == 0
    for strategy in settings.chunkings:
        chunks = first[f"chunks_{strategy}"]["chunks"]
        assert chunks > 0 and wv.count(strategy) == chunks
        assert first[f"vectors_{strategy}"]["inserted"] == chunks
    stats = graph.stats()
    assert stats["entities"] > 20
    # One entity per name: "Bergen" (GPE and ORG) and "DeepCurrent API" (PRODUCT and ORG) are merged and
    # counted; every entity's name is embedded; the run stamped the version readers compare.
    built = first["graph_recursive"]
    assert built["type_merges"] >= 2 and built["entities_embedded"] == stats["entities"]
    assert [len(graph.entities_by_names([name])) for name in ("bergen", "deepcurrent api")] == [1, 1]
    assert built["version"] and graph.graph_version("recursive") == built["version"]

    again = _run(defs)
    for strategy in settings.chunkings:
        assert again[f"chunks_{strategy}"]["documents_chunked"] == 0
        assert again[f"vectors_{strategy}"]["inserted"] == 0 and again[f"vectors_{strategy}"]["deleted"] == 0
    assert again["graph_recursive"]["chunks_added"] == 0
    assert again["graph_recursive"]["version"] == "" and graph.graph_version("recursive") == built["version"]

    teams = corpus / "company" / "teams.md"
    teams.write_text(teams.read_text().replace("Rafael Moreno", "Ingrid Solberg"))
    edited = _run(defs)
    for strategy in settings.chunkings:
        assert edited[f"chunks_{strategy}"]["documents_chunked"] == 1
        assert edited[f"vectors_{strategy}"]["inserted"] > 0
    index = wv.chunk_index("recursive")
    assert set(index.values()) >= {"docs/company/teams.md"}

    (corpus / "company" / "teams.md").unlink()
    removed = _run(defs)
    assert removed["documents"]["removed (tombstones)"] == 1
    for strategy in settings.chunkings:
        assert "docs/company/teams.md" not in set(wv.chunk_index(strategy).values())
        assert removed[f"vectors_{strategy}"]["deleted"] > 0
    assert not [c for c in graph.chunk_ids("recursive") if c not in set(wv.chunk_index("recursive"))]




def test_graph_asset_extracts_in_worker_processes_inside_a_run(settings, weaviate_store_factory, neo4j_store_factory,
                                                                 namespace, tmp_path):
    """The graph asset forks spaCy workers from a run process that holds open Weaviate and Neo4j clients."""
    make_musique_folder(tmp_path / "docs")
    recursive_only = dataclasses.replace(settings, chunkings=("recursive",), graph_chunkings=("recursive",))
    defs = _defs(recursive_only, namespace, tmp_path, nlp=NlpResource(processes=2))
    weaviate_store_factory(namespace)  # the run's collections: dropped, and checked gone, at teardown
    graph = neo4j_store_factory(namespace)
    first = _run(defs)
    chunks = first["chunks_recursive"]["chunks"]
    assert chunks >= 300
    assert first["graph_recursive"]["chunks_added"] == chunks
    assert first["graph_recursive"]["extraction_processes"] == 2 and first["graph_recursive"]["waves"] == 1
    assert graph.stats()["chunks"] == chunks and graph.dangling_mentions() == 0
    again = _run(defs)
    assert again["graph_recursive"]["chunks_added"] == 0


def test_office_email_and_csv_files_ingest_with_headings_tables_and_file_metadata(
        settings, weaviate_store_factory, namespace, tmp_path):
    """A folder with one file of each new format (and a bad one): Word headings and slide titles are heading paths,
    the file's author and dates are filterable like sidecar metadata, and the broken file and a sidecar with an
    undated `created` are only rejections."""
    from ragloom.filters import bind, build_where
    from ragloom.types import Scope

    docs = tmp_path / "docs"
    for rel in ("reports/quarterly_review_q3_2024.docx", "company/strategy_2025.pptx", "reports/sensor_fleet_2024.xlsx",
                "customers/customers.csv", "news/kelpwatch_shipped.eml", "reports/annual_report_2024.pdf"):
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SAMPLE_CORPUS / rel, docs / rel)
    (docs / "reports" / "broken.docx").write_bytes(b"PK\x03\x04 not a package")
    # a sidecar whose `created` (a declared DATE) is not a date: that document is rejected, never the sync (#29)
    (docs / "reports" / "late.md").write_text("# Late memo\n\nThe TideLens memo nobody dated properly.")
    (docs / "reports" / "late.md.meta.json").write_text('{"metadata": {"created": "last tuesday"}}')
    headered = dataclasses.replace(settings, chunkings=("headered",), graph_chunkings=(), summary_chunkings=())
    defs = _defs(headered, namespace, tmp_path)
    wv = weaviate_store_factory(namespace)
    result = defs.resolve_job_def("ingest_job").execute_in_process(raise_on_error=True)
    assert result.success
    meta = {m.asset_key.to_user_string(): {k: v.value for k, v in m.metadata.items()}
            for m in [e.event_specific_data.materialization for e in result.get_asset_materialization_events()]}
    assert meta["documents"]["documents"] == 7  # six files and the email's attachment
    assert meta["documents"]["rejected"] == 2 and "broken.docx" in meta["documents"]["rejected_files"]
    assert "late.md" in meta["documents"]["rejected_files"] and "last tuesday" in meta["documents"]["rejected_files"]

    def where(filters):
        return bind(build_where(Scope(), filters), wv.property_types("headered"))

    (supply,) = wv.bm25("headered", "battery cells single supplier", k=1)
    assert supply.heading_path == ["Quarterly Business Review Q3 2024", "Risks", "Supply chain"]
    (targets,) = wv.bm25("headered", "KelpWatch customers target", k=1)
    assert targets.document_id == "docs/company/strategy_2025.pptx" and targets.heading_path == ["Targets for 2025"]
    by_author = wv.bm25("headered", "HarborSight", k=50, where=where({"author": "Priya Raman"}))
    assert by_author and {i.document_id for i in by_author} == {"docs/reports/quarterly_review_q3_2024.docx"}
    dated = wv.bm25("headered", "TideLens", k=50, where=where({"created": {"gte": "2024-11-01"}}))
    assert {i.document_id for i in dated} == {"docs/reports/quarterly_review_q3_2024.docx",
                                              "docs/company/strategy_2025.pptx", "docs/reports/sensor_fleet_2024.xlsx"}
    attachment = wv.bm25("headered", "KW-2024-0009 calibration", k=1)
    assert attachment[0].document_id == "docs/news/kelpwatch_shipped.eml#kelpwatch_shipment.csv"
    assert attachment[0].metadata.get("meta_attached_to") == "docs/news/kelpwatch_shipped.eml"
