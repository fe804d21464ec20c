"""The ingest job on the private stack: two runs at once are serialized by the "weaviate" and "neo4j" pools of the
repo's dagster.yaml; a store that is down when a run starts is retried with backoff until it is back; and the
credentials (from the environment, as EnvVar) never appear in events, logs, run config, snapshots or errors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from dagster import DagsterEventType, DagsterInstance, EnvVar, serialize_value
from reliability_support import REPO

from pipelines.definitions import build_defs
from ragloom import stack
from ragloom.errors import StoreError
from ragloom.settings import SAMPLE_CORPUS, Settings
from ragloom.stack import neo4j as neo4j_stack
from ragloom.stack import weaviate as weaviate_stack
from ragloom.stores.neo4j import Neo4jStore
from ragloom.stores.weaviate import WeaviateStore
from resources import (
    ArtifactStore,
    CorpusResource,
    EmbedderResource,
    Neo4jResource,
    NlpResource,
    ParquetIOManager,
    WeaviateResource,
)

STORE_STEPS = ("vectors_recursive", "graph_recursive")
POOLS = ("weaviate", "neo4j")
HOLDER_RUN = "reliability-test-holds-the-pools"


@pytest.fixture(scope="module")
def fast_nlp(tmp_path_factory) -> str:
    """A spaCy pipeline on disk whose "ner" is an entity ruler: NlpResource loads it in a blink."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("entity_ruler", name="ner").add_patterns(
        [{"label": "ORG", "pattern": [{"IS_UPPER": True, "IS_ALPHA": True, "LENGTH": {">=": 2}}]},
         {"label": "PERSON", "pattern": [{"IS_TITLE": True, "IS_SENT_START": False}, {"IS_TITLE": True}]}])
    path = tmp_path_factory.mktemp("nlp") / "ruler"
    nlp.to_disk(path)
    return str(path)


def make_defs(settings: Settings, prefix: str, work: Path, nlp_path: str):
    """The repo's Definitions for one strategy, with resources on the private stack and secrets as EnvVar."""
    docs = work / "docs"
    if not docs.exists():
        shutil.copytree(SAMPLE_CORPUS, docs)
    artifacts = ArtifactStore(base_dir=str(work / "artifacts"))
    resources = {
        "corpus": CorpusResource(docs_dir=str(docs), uploads_dir=str(work / "uploads")),
        "artifacts": artifacts,
        "io_manager": ParquetIOManager(artifacts=artifacts),
        "weaviate": WeaviateResource(host=settings.weaviate_host, http_port=settings.weaviate_http_port,
                                     grpc_port=settings.weaviate_grpc_port, url="",
                                     api_key=EnvVar("RAGLOOM_WEAVIATE_API_KEY"), collection_prefix=prefix),
        "neo4j": Neo4jResource(uri=settings.resolved_neo4j_uri, password=EnvVar("RAGLOOM_NEO4J_PASSWORD"),
                               namespace=prefix.lower()),
        "embedder": EmbedderResource(),
        "nlp": NlpResource(model=nlp_path),
    }
    one = dataclasses.replace(settings, strategies=("recursive",), graph_strategies=("recursive",))
    return build_defs(one, resources)


@pytest.fixture(scope="module")
def instance(tmp_path_factory):
    """A Dagster instance configured by the repo's dagster.yaml (pools default_limit 1)."""
    home = tmp_path_factory.mktemp("dagster_home")
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    previous = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home)
    try:
        with DagsterInstance.from_config(str(home)) as inst:
            assert inst.event_log_storage.supports_global_concurrency_limits
            assert inst.event_log_storage.get_pool_config().default_pool_limit == 1
            yield inst
    finally:
        if previous is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = previous


@pytest.fixture(scope="module")
def secret_env(private_stack):
    """The private stack's credentials in the environment, where the resources' EnvVars read them."""
    saved = {k: os.environ.get(k) for k in ("RAGLOOM_WEAVIATE_API_KEY", "RAGLOOM_NEO4J_PASSWORD")}
    os.environ["RAGLOOM_WEAVIATE_API_KEY"] = private_stack.weaviate_api_key
    os.environ["RAGLOOM_NEO4J_PASSWORD"] = private_stack.neo4j_password
    try:
        yield (private_stack.weaviate_api_key, private_stack.neo4j_password)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _events(instance: DagsterInstance, run_id: str):
    return instance.all_logs(run_id)


def _step_windows(instance: DagsterInstance, run_id: str) -> dict[str, tuple[float, float]]:
    starts, ends = {}, {}
    for entry in _events(instance, run_id):
        event = entry.dagster_event
        if event is None or event.step_key not in STORE_STEPS:
            continue
        if event.event_type == DagsterEventType.STEP_START:
            starts[event.step_key] = entry.timestamp
        elif event.event_type in (DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE):
            ends[event.step_key] = entry.timestamp
    return {k: (starts[k], ends[k]) for k in starts if k in ends}


def _blocked(instance: DagsterInstance, run_id: str) -> set[str]:
    return {e.dagster_event.step_key for e in _events(instance, run_id)
            if e.dagster_event is not None and e.dagster_event.event_type == DagsterEventType.ENGINE_EVENT
            and "blocked by limit for pool" in (e.dagster_event.message or "")}


@pytest.fixture(scope="module")
def two_runs(private_stack, instance, secret_env, fast_nlp, tmp_path_factory):
    """Two ingest runs started together while the test holds both pools; released once both are blocked."""
    settings = stack.up(private_stack)
    prefix = f"Dagster{int(time.time())}"
    work = tmp_path_factory.mktemp("ingest")
    defs = make_defs(settings, prefix, work, fast_nlp)
    job = defs.resolve_job_def("ingest_job")
    storage = instance.event_log_storage
    for pool in POOLS:
        storage.initialize_concurrency_limit_to_default(pool)
        assert storage.claim_concurrency_slot(pool, HOLDER_RUN, f"holder_{pool}", 0).is_claimed

    results: dict[str, object] = {}
    out, err = io.StringIO(), io.StringIO()
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger().addHandler(handler)

    def run(name: str) -> None:
        results[name] = job.execute_in_process(instance=instance, raise_on_error=False, tags={"test/run": name})

    threads = [threading.Thread(target=run, args=(n,)) for n in ("first", "second")]
    released_after = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            started = time.monotonic()
            for t in threads:
                t.start()
            deadline = started + 300
            while time.monotonic() < deadline:
                runs = [r.run_id for r in instance.get_runs() if r.tags.get("test/run")]
                if len(runs) == 2 and all(set(STORE_STEPS) <= _blocked(instance, r) for r in runs):
                    break
                time.sleep(0.5)
            released_after = time.monotonic() - started
            storage.free_concurrency_slots_for_run(HOLDER_RUN)
            for t in threads:
                t.join(timeout=600)
    finally:
        storage.free_concurrency_slots_for_run(HOLDER_RUN)
        logging.getLogger().removeHandler(handler)
    logs = out.getvalue() + err.getvalue() + "\n".join(r.getMessage() for r in records)
    yield {"defs": defs, "results": results, "settings": settings, "prefix": prefix, "logs": logs,
           "released_after": released_after, "instance": instance}
    with WeaviateStore.connect(dataclasses.replace(stack.up(settings), collection_prefix=prefix)) as store:
        store.drop_collections()
    with Neo4jStore.connect(settings, namespace=prefix.lower()) as graph:
        graph.clear()


def test_pools_serialize_the_store_writers_of_concurrent_runs(two_runs, report):
    instance, results = two_runs["instance"], two_runs["results"]
    assert set(results) == {"first", "second"}
    assert all(r.success for r in results.values()), [r.get_step_failure_events() for r in results.values()]
    runs = {name: r.run_id for name, r in results.items()}
    blocked = {name: sorted(_blocked(instance, run_id)) for name, run_id in runs.items()}
    windows = {name: _step_windows(instance, run_id) for name, run_id in runs.items()}
    overlaps = {}
    for step in STORE_STEPS:
        (a0, a1), (b0, b1) = windows["first"][step], windows["second"][step]
        overlaps[step] = max(0.0, min(a1, b1) - max(a0, b0))
    settings, prefix = two_runs["settings"], two_runs["prefix"]
    chunks = results["second"].asset_value("chunks_recursive")
    with WeaviateStore.connect(dataclasses.replace(settings, collection_prefix=prefix)) as store:
        index = store.chunk_index("recursive")
        count = store.count("recursive")
    report(runs=2, both_succeeded=True, blocked_steps=blocked, released_after_s=round(two_runs["released_after"], 1),
           step_windows={n: {s: round(b - a, 2) for s, (a, b) in w.items()} for n, w in windows.items()},
           overlap_seconds=overlaps, chunks=len(chunks), objects=count,
           objects_lost=len(set(chunks["chunk_id"]) - set(index)), duplicates=count - len(index))
    for name in runs:  # both runs reached the store writers while the pools were held: they really contended
        assert set(STORE_STEPS) <= set(blocked[name]), blocked
    assert overlaps == {step: 0.0 for step in STORE_STEPS}, windows
    assert set(index) == set(chunks["chunk_id"]) and count == len(index)


def _texts_of_run(instance: DagsterInstance, run_id: str) -> str:
    run = instance.get_run_by_id(run_id)
    parts = [serialize_value(entry) for entry in instance.all_logs(run_id)]
    parts.append(serialize_value(run.run_config))
    parts.append(serialize_value(instance.get_job_snapshot(run.job_snapshot_id)))
    parts.append(serialize_value(instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id)))
    parts.append(serialize_value(run.tags))
    return "\n".join(parts)


def test_secrets_never_leave_the_environment(two_runs, private_stack, report):
    from dagster._core.remote_representation.external_data import RepositorySnap

    key, password = private_stack.weaviate_api_key, private_stack.neo4j_password
    assert len(key) >= 16 and len(password) >= 16
    instance, defs = two_runs["instance"], two_runs["defs"]
    places = {f"run {name}: events, run config, job and plan snapshots, tags": _texts_of_run(instance, r.run_id)
              for name, r in two_runs["results"].items()}
    places["repository snapshot the UI shows (resources, jobs, sensors, schedules)"] = serialize_value(
        RepositorySnap.from_def(defs.get_repository_def()))
    places["stdout, stderr and Python logs of both runs"] = two_runs["logs"]
    places["Settings.public_view()"] = repr(private_stack.public_view())
    places["ragloom stack status"] = repr(stack.status(private_stack))

    wrong = dataclasses.replace(private_stack, weaviate_api_key="wrong-" + key[::-1], neo4j_password="wrong-" + password[::-1])
    errors = {}
    for name, connect in (("weaviate", lambda: WeaviateStore.connect(wrong)), ("neo4j", lambda: Neo4jStore.connect(wrong))):
        with pytest.raises(StoreError) as failure:
            connect()
        chain, e = [], failure.value
        while e is not None:
            chain.append(f"{type(e).__name__}: {e!s} {e!r}")
            e = e.__cause__ or e.__context__
        errors[name] = chain[0][:160]
        places[f"{name} auth failure (whole exception chain)"] = "\n".join(chain)
    for name in ("weaviate", "neo4j"):
        process = (weaviate_stack if name == "weaviate" else neo4j_stack).process(private_stack)
        pid = process.pid()
        if pid is not None:
            places[f"{name} server command line"] = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        places[f"{name} server logs"] = "\n".join(p.read_text(errors="replace") for p in process.log_file.parent.rglob(
            "*.log") if p.is_file())

    secrets = {"weaviate api key": key, "neo4j password": password,
               "wrong weaviate key": wrong.weaviate_api_key, "wrong neo4j password": wrong.neo4j_password}
    leaks = {f"{what} in {place}" for place, text in places.items() for what, secret in secrets.items()
             if secret in text}
    report(places_checked=len(places), characters_checked=sum(len(t) for t in places.values()), leaks=sorted(leaks),
           auth_errors=errors)
    assert not leaks, leaks
    assert all("refused" in message or "401" in message or "unauthor" in message.lower()
               for message in errors.values()), errors


def test_a_store_down_at_run_start_is_retried_until_it_is_back(private_stack, instance, secret_env, fast_nlp,
                                                               tmp_path_factory, report):
    """Weaviate is dead when the run starts; the vectors step fails with a StoreError, Dagster's RetryPolicy
    retries it with backoff, Weaviate comes back meanwhile, and the run completes with every chunk indexed."""
    settings = stack.up(private_stack)
    prefix = f"Retry{int(time.time())}"
    job = make_defs(settings, prefix, tmp_path_factory.mktemp("retry"), fast_nlp).resolve_job_def("ingest_job")
    weaviate_stack.process(settings).kill()
    restarted = {}

    def restart_when_retried() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not restarted:
            for run in instance.get_runs():
                if run.tags.get("test/run") == prefix and any(
                        e.dagster_event is not None and e.dagster_event.event_type == DagsterEventType.STEP_UP_FOR_RETRY
                        for e in instance.all_logs(run.run_id)):
                    began = time.monotonic()
                    stack.up(settings)
                    restarted["seconds"] = time.monotonic() - began
            time.sleep(0.5)

    watcher = threading.Thread(target=restart_when_retried)
    watcher.start()
    try:
        started = time.monotonic()
        result = job.execute_in_process(instance=instance, raise_on_error=False, tags={"test/run": prefix})
        seconds = time.monotonic() - started
    finally:
        restarted.setdefault("seconds", None)
        watcher.join()
        settings = stack.up(settings)
    events = [e for e in instance.all_logs(result.run_id) if e.dagster_event is not None
              and e.dagster_event.step_key == "vectors_recursive"]
    retries = [e for e in events if e.dagster_event.event_type == DagsterEventType.STEP_UP_FOR_RETRY]
    first_error = next((e.dagster_event.event_specific_data.error for e in retries), None)
    chunks = result.asset_value("chunks_recursive") if result.success else None
    with WeaviateStore.connect(dataclasses.replace(settings, collection_prefix=prefix)) as store:
        index = store.chunk_index("recursive")
        store.drop_collections()
    with Neo4jStore.connect(settings, namespace=prefix.lower()) as graph:
        graph.clear()
    cause = first_error.cause if first_error is not None else None
    report(fault="weaviate down at run start", faults_injected=1, survived=result.success, retries=len(retries),
           run_seconds=round(seconds, 1), restart_seconds=restarted["seconds"],
           first_error=(cause or first_error).message.splitlines()[0][:200] if first_error else None,
           objects_lost=len(set(chunks["chunk_id"]) - set(index)) if chunks is not None else None)
    assert result.success
    assert retries, "the step never failed: Weaviate was not down when it ran"
    assert "StoreError" in (cause or first_error).cls_name
    assert chunks is not None and set(index) == set(chunks["chunk_id"])
