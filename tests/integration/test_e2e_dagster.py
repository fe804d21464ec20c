"""End to end as people use it: `dagster-webserver` + `dagster-daemon` on loopback, files dropped into the
uploads folder, the sensor indexes them into the real Weaviate and Neo4j, deletes take them out again;
a headless Chromium opens the UI, shows the asset graph and launches a materialization; and the ingest job,
launched through the webserver's GraphQL API as the UI launches it, indexes a folder with one file of each format.

Figures (upload-to-retrievable latency) go to test-artifacts/e2e_latency.json, screenshots beside it.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from mixed_folder import check_documents_metadata, check_retrievable, make_mixed_folder
from polling import free_port, wait_for

from ragloom.errors import StoreError
from ragloom.settings import REPO_ROOT
from ragloom.stores.weaviate import WeaviateStore

pytestmark = pytest.mark.e2e
ARTIFACTS = REPO_ROOT / "test-artifacts"
STRATEGY = "recursive"
CHUNKINGS = "recursive,headered"  # headered: the mixed folder's Word headings and slide titles (last test)
DOC_TEMPLATE = """# Field note {n}

Captain Ingrid Solberg of the research vessel Aurora Borealis met Professor Tobias Lindgren in Bergen.
They planned a survey of the Hardanger Fjord for the Norwegian Polar Institute. Note number {n}.
"""



@pytest.fixture(scope="module")
def dagster_stack(settings, module_weaviate_store_factory, module_neo4j_store_factory, tmp_path_factory):
    """Webserver + daemon with their own DAGSTER_HOME, collections, graph namespace and folders (the factories
    drop the collections and graph after the processes are gone, and check nothing is left)."""
    root = tmp_path_factory.mktemp("e2e")
    suffix = os.urandom(4).hex()
    vectors = module_weaviate_store_factory(f"E2e{suffix}")
    graph = module_neo4j_store_factory(f"e2e_{suffix}")
    home = root / "dagster_home"
    home.mkdir()
    shutil.copy(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
    (root / "docs").mkdir()
    (root / "uploads").mkdir()
    port = free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "RAGLOOM_DOCS_DIR": str(root / "docs"),
        "RAGLOOM_UPLOADS_DIR": str(root / "uploads"),
        "RAGLOOM_ARTIFACTS_DIR": str(root / "artifacts"),
        "RAGLOOM_COLLECTION_PREFIX": vectors.prefix,
        "RAGLOOM_GRAPH_NAMESPACE": graph.namespace,
        "RAGLOOM_CHUNKINGS": CHUNKINGS,
        "RAGLOOM_GRAPH_CHUNKINGS": STRATEGY,
        "RAGLOOM_SENSOR_INTERVAL_SECONDS": "3",
        "PYTHONUNBUFFERED": "1",
    }
    bindir = Path(sys.executable).parent
    # create the instance's sqlite schema once, before two processes race to migrate it (as dagster dev does)
    subprocess.run([str(bindir / "dagster"), "instance", "migrate"], cwd=REPO_ROOT, env=env, check=True,
                   capture_output=True)
    logs = {name: open(root / f"{name}.log", "w") for name in ("webserver", "daemon")}
    procs = [
        subprocess.Popen([str(bindir / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port),
                          "-w", str(REPO_ROOT / "workspace.yaml")], cwd=REPO_ROOT, env=env,
                         stdout=logs["webserver"], stderr=subprocess.STDOUT, start_new_session=True),
        subprocess.Popen([str(bindir / "dagster-daemon"), "run", "-w", str(REPO_ROOT / "workspace.yaml")],
                         cwd=REPO_ROOT, env=env, stdout=logs["daemon"], stderr=subprocess.STDOUT,
                         start_new_session=True),
    ]
    url = f"http://127.0.0.1:{port}"

    def server_up():
        try:
            with urllib.request.urlopen(f"{url}/server_info", timeout=2) as resp:
                return resp.status == 200
        except OSError:
            return False

    try:
        wait_for(server_up, 180, "dagster-webserver")
        yield {"url": url, "root": root, "env": env, "prefix": env["RAGLOOM_COLLECTION_PREFIX"],
               "ns": env["RAGLOOM_GRAPH_NAMESPACE"], "home": home}
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        for f in logs.values():
            f.close()
        ARTIFACTS.mkdir(exist_ok=True)
        for name in ("webserver", "daemon"):
            shutil.copy(root / f"{name}.log", ARTIFACTS / f"e2e_{name}.log")


def _entities_of(neo4j_driver, ns: str, document_id: str) -> list[str]:
    records, _, _ = neo4j_driver.execute_query(
        "MATCH (c:Chunk {ns: $ns, document_id: $doc})-[:MENTIONS]->(e:Entity) RETURN DISTINCT e.name AS name",
        ns=ns, doc=document_id)
    return [r["name"] for r in records]


@pytest.mark.timeout(1500)
def test_uploads_become_retrievable_and_deletes_disappear(dagster_stack, weaviate_client, neo4j_driver):
    store = WeaviateStore(weaviate_client, dagster_stack["prefix"])
    uploads = dagster_stack["root"] / "uploads"
    files = {}
    started = time.monotonic()
    for n in range(3):  # one batch, as a person uploads several files at once
        rel = f"acme/alice/chat{n}/note{n}.md"
        (uploads / rel).parent.mkdir(parents=True, exist_ok=True)
        (uploads / rel).write_text(DOC_TEMPLATE.format(n=n))
        files[f"uploads/{rel}"] = uploads / rel
    latencies: dict[str, float] = {}
    try:
        def indexed():
            try:
                in_weaviate = set(store.chunk_index(STRATEGY).values()) if store.exists(STRATEGY) else set()
            except StoreError:  # the run is creating the collection right now: its shard is not ready yet
                return False
            for document_id in files:
                if document_id not in latencies and document_id in in_weaviate \
                        and _entities_of(neo4j_driver, dagster_stack["ns"], document_id):
                    latencies[document_id] = time.monotonic() - started
            return len(latencies) == len(files)

        wait_for(indexed, 900, "uploads to reach Weaviate and Neo4j", interval=0.5)
        for n, document_id in enumerate(files):
            assert any("Solberg" in e for e in _entities_of(neo4j_driver, dagster_stack["ns"], document_id))
            # the chunk carries the scope of its upload folder
            items = store.bm25(STRATEGY, f"Field note {n} Hardanger", k=10)
            mine = [i for i in items if i.document_id == document_id]
            assert mine and mine[0].metadata["scope_path"] == f"acme/alice/chat{n}"

        for path in files.values():
            path.unlink()

        def gone():
            ids = set(store.chunk_index(STRATEGY).values())
            return all(d not in ids and not _entities_of(neo4j_driver, dagster_stack["ns"], d) for d in files)

        wait_for(gone, 900, "deleted uploads to leave both stores")
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        values = sorted(latencies.values())
        (ARTIFACTS / "e2e_latency.json").write_text(json.dumps({
            "upload_to_retrievable_seconds": [round(x, 2) for x in values],
            "median_seconds": round(statistics.median(values), 2) if values else None,
        }, indent=2))


@pytest.mark.timeout(1500)
def test_ui_shows_asset_graph_and_launches_materialization(dagster_stack):
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("RAGLOOM_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Debian's chromium is required (scripts/browser-deps.sh installs it)"
    ARTIFACTS.mkdir(exist_ok=True)
    url = dagster_stack["url"]

    def launched_runs():
        query = {"query": "{ runsOrError { ... on Runs { results { runId status tags { key value } } } } }"}
        req = urllib.request.Request(f"{url}/graphql", data=json.dumps(query).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            runs = json.load(resp)["data"]["runsOrError"]["results"]
        return [r for r in runs if not any(t["key"] == "dagster/sensor_name" for t in r["tags"])]

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(f"{url}/asset-groups", wait_until="networkidle")
        page.goto(f"{url}/locations/ragloom/asset-groups/ingestion", wait_until="networkidle")
        for name in ("documents", f"chunks_{STRATEGY}", f"vectors_{STRATEGY}", f"graph_{STRATEGY}"):
            page.get_by_text(name, exact=True).first.wait_for(timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "ui_asset_graph.png"))

        page.get_by_role("button", name="Materialize all").click()
        # the click launched a run (through GraphQL, polled instead of a fixed 5 s wait); the screenshot shows the
        # button still launching
        runs = wait_for(launched_runs, 60, "the UI-launched run", interval=0.25)
        page.screenshot(path=str(ARTIFACTS / "ui_materialize_launched.png"))
        browser.close()

    run_id = runs[0]["runId"]

    def finished():
        run = next(r for r in launched_runs() if r["runId"] == run_id)
        return run if run["status"] in {"SUCCESS", "FAILURE", "CANCELED"} else None

    assert wait_for(finished, 420, "the UI-launched run to finish", interval=0.5)["status"] == "SUCCESS"


def _graphql(url: str, query: str, variables: dict | None = None) -> dict:
    request = urllib.request.Request(f"{url}/graphql", data=json.dumps({"query": query, "variables": variables or {}})
                                     .encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        body = json.load(resp)
    assert not body.get("errors"), body["errors"]
    return body["data"]


# what the UI's Launchpad sends (launchPipelineExecution, which dagster_graphql's client sends, is its older name)
LAUNCH = """
mutation Launch($executionParams: ExecutionParams!) {
  launchRun(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on PythonError { message }
    ... on Error { message }
  }
}"""
RUN = """
query Run($runId: ID!) {
  runOrError(runId: $runId) {
    ... on Run { status }
  }
}"""
MATERIALIZATIONS = """
query Materializations($runId: ID!) {
  logsForRun(runId: $runId) {
    ... on EventConnection {
      events {
        __typename
        ... on MaterializationEvent {
          assetKey { path }
          metadataEntries {
            label
            ... on IntMetadataEntry { intValue }
            ... on MarkdownMetadataEntry { mdStr }
            ... on JsonMetadataEntry { jsonString }
          }
        }
      }
    }
  }
}"""


@pytest.mark.timeout(1500)
def test_ingest_job_launched_through_graphql_indexes_a_mixed_folder(dagster_stack, weaviate_client):
    url = dagster_stack["url"]
    make_mixed_folder(dagster_stack["root"] / "docs")  # the code location's RAGLOOM_DOCS_DIR
    repositories = _graphql(url, "{ repositoriesOrError { ... on RepositoryConnection { nodes { name "
                                 "location { name } pipelines { name } } } } }")["repositoriesOrError"]["nodes"]
    (repository,) = [r for r in repositories if "ingest_job" in {p["name"] for p in r["pipelines"]}]
    launched = _graphql(url, LAUNCH, {"executionParams": {
        "selector": {"repositoryLocationName": repository["location"]["name"], "repositoryName": repository["name"],
                     "jobName": "ingest_job"},
        "runConfigData": {}, "mode": "default",
        "executionMetadata": {"tags": [{"key": "ragloom/trigger", "value": "graphql-test"}]}}})
    result = launched["launchRun"]
    assert result["__typename"] == "LaunchRunSuccess", result
    run_id = result["run"]["runId"]

    def finished():
        status = _graphql(url, RUN, {"runId": run_id})["runOrError"]["status"]
        return status if status in {"SUCCESS", "FAILURE", "CANCELED"} else None

    # the queued run waits for the daemon, then runs in its own process
    assert wait_for(finished, 900, "the GraphQL-launched ingest run", interval=1) == "SUCCESS"
    events = _graphql(url, MATERIALIZATIONS, {"runId": run_id})["logsForRun"]["events"]
    materialized = {"/".join(e["assetKey"]["path"]): e["metadataEntries"] for e in events
                    if e["__typename"] == "MaterializationEvent"}
    assert {"documents", "chunks_headered", "vectors_headered"} <= set(materialized)
    entries = {m["label"]: m.get("intValue", m.get("mdStr", m.get("jsonString"))) for m in materialized["documents"]}
    check_documents_metadata({**entries, "by_format": json.loads(entries["by_format"])})
    check_retrievable(WeaviateStore(weaviate_client, dagster_stack["prefix"]), "headered")
