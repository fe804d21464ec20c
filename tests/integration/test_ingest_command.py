"""`ragloom ingest` as a person runs it: a real process on a folder with one file of each format and a broken one,
against the real Weaviate and Neo4j. The summary it prints matches the run the Dagster instance recorded (so the UI
shows the same run), a progress line came per asset, and a failed run exits non-zero with the failed step."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mixed_folder import BROKEN, check_documents_metadata, check_retrievable, make_mixed_folder, make_musique_folder
from polling import free_port

from ragloom.settings import REPO_ROOT

CHUNKINGS = ("headered", "recursive")


def _env(tmp_path: Path, namespace: str, **extra: str) -> dict[str, str]:
    home = tmp_path / "dagster_home"
    home.mkdir(exist_ok=True)
    shutil.copy(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
    return {**os.environ, "DAGSTER_HOME": str(home), "RAGLOOM_COLLECTION_PREFIX": namespace,
            "RAGLOOM_GRAPH_NAMESPACE": namespace, "RAGLOOM_ARTIFACTS_DIR": str(tmp_path / "artifacts"),
            "RAGLOOM_UPLOADS_DIR": str(tmp_path / "uploads"), "RAGLOOM_SUMMARY_CHUNKINGS": "", **extra}


def _ingest(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragloom", "ingest", *args], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=900)


def _recorded(home: str, run_id: str, monkeypatch):
    """The run as the instance (the UI's) holds it, with each asset's materialization metadata."""
    from dagster import DagsterEventType, DagsterInstance

    monkeypatch.setenv("DAGSTER_HOME", home)  # the instance's dagster.yaml names its storage by this variable
    with DagsterInstance.get() as instance:
        run = instance.get_run_by_id(run_id)
        records = instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION).records
        metadata = {}
        for record in records:
            materialization = record.event_log_entry.dagster_event.event_specific_data.materialization
            metadata[materialization.asset_key.to_user_string()] = {
                k: v.value for k, v in materialization.metadata.items()}
        return run, metadata


def test_ingest_command_indexes_a_mixed_folder_and_the_run_is_in_the_instance(
        tmp_path, namespace, weaviate_store_factory, neo4j_store_factory, monkeypatch):
    store, graph = weaviate_store_factory(namespace), neo4j_store_factory(namespace)
    docs = make_mixed_folder(tmp_path / "docs")
    env = _env(tmp_path, namespace)
    done = _ingest(env, str(docs), "--chunkings", ",".join(CHUNKINGS), "--graph-chunkings", "recursive",
                   "--scope", "acme")
    assert done.returncode == 0, done.stdout + done.stderr

    first = done.stdout.splitlines()[0]
    match = re.match(r"ingest_job run ([0-9a-f-]{36}): SUCCESS in [\d.]+s", first)
    assert match, done.stdout
    run, recorded = _recorded(env["DAGSTER_HOME"], match.group(1), monkeypatch)
    assert run.job_name == "ingest_job" and run.status.value == "SUCCESS"
    assert set(recorded) == {"documents", *(f"{k}_{c}" for k in ("chunks", "vectors") for c in CHUNKINGS),
                             "graph_recursive"}
    check_documents_metadata(recorded["documents"])

    # the summary is the recorded metadata; a progress line (stderr) came for each asset, and one for the rejection
    d = recorded["documents"]
    assert (f"documents  {d['documents']}: {d['new']} new, {d['changed']} changed, {d['unchanged']} unchanged, "
            f"{d['removed (tombstones)']} removed, {d['rejected']} rejected") in done.stdout
    for chunking in CHUNKINGS:
        chunks, vectors = recorded[f"chunks_{chunking}"], recorded[f"vectors_{chunking}"]
        assert f"chunks     {chunking}: {chunks['chunks']} chunks," in done.stdout
        assert f"vectors    {chunking}: {vectors['inserted']} inserted," in done.stdout
        assert vectors["inserted"] == chunks["chunks"] == store.count(chunking)
    assert f"graph      recursive: {recorded['graph_recursive']['chunks_added']} chunks added" in done.stdout
    assert recorded["graph_recursive"]["chunks_added"] == graph.stats()["chunks"] > 0
    progress = [line.split("] ", 1)[1] for line in done.stderr.splitlines() if line.startswith("[")]
    assert {line.split(":")[0] for line in progress if not line.startswith("check ")} >= set(recorded)
    assert any(line.startswith("documents: rejected") and BROKEN in line for line in progress), progress

    # --scope put the folder's documents in the tenant's scope
    assert {i.metadata["scope_path"] for i in store.bm25("headered", "HarborSight", k=50)} == {"acme"}
    check_retrievable(store, "headered", scope="acme")

    again = _ingest(env, str(docs), "--chunkings", ",".join(CHUNKINGS), "--graph-chunkings", "recursive",
                    "--scope", "acme", "--json")
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["status"] == "SUCCESS" and summary["documents"]["new"] == 0
    assert summary["documents"]["unchanged"] == d["documents"]
    assert all(v["inserted"] == 0 for v in summary["vectors"].values()) and summary["graph"]["recursive"][
        "chunks_added"] == 0


def test_ingest_command_writes_vectors_in_writer_processes(tmp_path, namespace, weaviate_store_factory, monkeypatch):
    """On a machine where the sync writes from worker processes (forced here): they are spawned from the command's
    Dagster run, and every chunk is written once."""
    store = weaviate_store_factory(namespace)
    docs = make_musique_folder(tmp_path / "docs")
    # one insert request per write: the sync's batches stay at 256 chunks, so 300 documents make several
    env = _env(tmp_path, namespace, RAGLOOM_WEAVIATE_WRITE_PROCESSES="2", RAGLOOM_WEAVIATE_WRITE_REQUESTS="1")
    done = _ingest(env, str(docs), "--chunkings", "recursive", "--graph-chunkings", "", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    _, recorded = _recorded(env["DAGSTER_HOME"], json.loads(done.stdout)["run_id"], monkeypatch)
    vectors = recorded["vectors_recursive"]  # as the UI shows the step
    assert vectors["write_processes"] == 2
    assert vectors["inserted"] == store.count("recursive") == len(store.chunk_index("recursive")) > 256


def test_ingest_command_exits_non_zero_with_the_failed_step(tmp_path, namespace, neo4j_store_factory, monkeypatch):
    """Weaviate unreachable: the vectors step fails after its retries; the exit code is 1 and the reason printed."""
    neo4j_store_factory(namespace)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "note.md").write_text("# Note\n\nThe Hardanger survey starts in May.")
    closed = str(free_port())
    # the retries' timing is a setting (5 s, 10 s, 20 s by default): their number and the outcome are what count
    env = _env(tmp_path, namespace, RAGLOOM_WEAVIATE_HTTP_PORT=closed, RAGLOOM_WEAVIATE_GRPC_PORT=closed,
               RAGLOOM_WEAVIATE_URL="", RAGLOOM_STORE_RETRY_DELAY_SECONDS="0.2")
    done = _ingest(env, str(docs), "--chunkings", "recursive", "--graph-chunkings", "", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "FAILURE" and summary["documents"]["new"] == 1
    assert [f.split(":")[0] for f in summary["failures"]] == ["vectors_recursive"]
    assert "FAILED vectors_recursive" in done.stderr
    run, _ = _recorded(env["DAGSTER_HOME"], summary["run_id"], monkeypatch)
    assert run.status.value == "FAILURE"
    from dagster import DagsterEventType, DagsterInstance

    with DagsterInstance.get() as instance:  # DAGSTER_HOME set by _recorded
        retries = instance.get_records_for_run(summary["run_id"], of_type=DagsterEventType.STEP_UP_FOR_RETRY).records
    assert [r.event_log_entry.step_key for r in retries] == ["vectors_recursive"] * 3


@pytest.mark.parametrize("args, needle", [
    (["/no/such/folder"], "not a folder"),
    (["--chunkings", "no_such_chunker"], "unknown chunking ['no_such_chunker']"),
    (["--scope", "acme/../x"], "scope part '..' is not allowed"),
])
def test_ingest_command_refuses_bad_options_before_any_run(tmp_path, namespace, args, needle, monkeypatch):
    from dagster import DagsterInstance

    env = _env(tmp_path, namespace)
    done = _ingest(env, *args)
    assert done.returncode == 2 and needle in done.stderr, done.stderr
    monkeypatch.setenv("DAGSTER_HOME", env["DAGSTER_HOME"])
    with DagsterInstance.get() as instance:
        assert not instance.get_runs()
