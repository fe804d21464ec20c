"""The ingest job on the private stack, in run-worker processes sharing one instance configured by the repo's
dagster.yaml: two runs at once are serialized by the "weaviate" and "neo4j" pools; a run worker killed mid-step
must not leave those pools held; a store that is down when a run starts is retried with backoff until it is
back; and the credentials (EnvVar, from the environment) never appear in events, logs, run config, snapshots
or errors.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus, serialize_value
from reliability_support import REPO, environ_without_ragloom, ingest_defs, save_ruler_ner, settings_env

from ragloom import stack
from ragloom.errors import StoreError
from ragloom.settings import Settings
from ragloom.stack import neo4j as neo4j_stack
from ragloom.stack import weaviate as weaviate_stack
from ragloom.stores.neo4j import Neo4jStore
from ragloom.stores.weaviate import WeaviateStore

STORE_STEPS = ("vectors_recursive", "graph_recursive")
POOLS = ("weaviate", "neo4j")
HOLDER_RUN = "reliability-test-holds-the-pools"
WORKER = Path(__file__).with_name("reliability_worker.py")


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """DAGSTER_HOME with the repo's dagster.yaml (pools default_limit 1)."""
    path = tmp_path_factory.mktemp("dagster_home")
    shutil.copy(REPO / "dagster.yaml", path / "dagster.yaml")
    return path


@pytest.fixture(scope="module")
def instance(home):
    previous = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home)  # dagster.yaml's storage reads it
    try:
        with DagsterInstance.from_config(str(home)) as inst:
            assert inst.event_log_storage.supports_global_concurrency_limits
            assert inst.event_log_storage.get_pool_config().default_pool_limit == 1
            yield inst
    finally:
        os.environ.pop("DAGSTER_HOME", None) if previous is None else os.environ.__setitem__("DAGSTER_HOME", previous)


@pytest.fixture(scope="module")
def nlp_path(tmp_path_factory) -> str:
    return save_ruler_ner(tmp_path_factory.mktemp("nlp") / "ruler")


def start_worker(settings: Settings, home: Path, tag: str, prefix: str, work: Path, nlp: str,
                 log: Path) -> subprocess.Popen:
    """An ingest run in its own process (a run worker), on the shared instance; output to ``log``."""
    env = {**environ_without_ragloom(), **settings_env(settings), "DAGSTER_HOME": str(home), "PYTHONPATH": str(REPO)}
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, str(WORKER), "ingest", tag, prefix, str(work), nlp], cwd=REPO,
                                env=env, stdout=out, stderr=subprocess.STDOUT)


def tagged_runs(instance: DagsterInstance, tag: str) -> list:
    return [r for r in instance.get_runs() if r.tags.get("test/run") == tag]


def step_events(instance: DagsterInstance, run_id: str, step: str | None = None) -> list:
    return [e for e in instance.all_logs(run_id) if e.dagster_event is not None
            and (step is None or e.dagster_event.step_key == step)]


def blocked_steps(instance: DagsterInstance, run_id: str) -> set[str]:
    return {e.dagster_event.step_key for e in step_events(instance, run_id)
            if e.dagster_event.event_type == DagsterEventType.ENGINE_EVENT
            and "blocked by limit for pool" in (e.dagster_event.message or "")}


def step_windows(instance: DagsterInstance, run_id: str) -> dict[str, tuple[float, float]]:
    starts, ends = {}, {}
    for e in step_events(instance, run_id):
        if e.dagster_event.step_key in STORE_STEPS:
            if e.dagster_event.event_type == DagsterEventType.STEP_START:
                starts[e.dagster_event.step_key] = e.timestamp
            elif e.dagster_event.event_type in (DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE):
                ends[e.dagster_event.step_key] = e.timestamp
    return {k: (starts[k], ends[k]) for k in starts if k in ends}


def wait_for(condition, timeout: float, what: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if condition():
            return time.monotonic() - started
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def cleanup(settings: Settings, prefix: str) -> None:
    settings = stack.up(settings)
    with WeaviateStore.connect(dataclasses.replace(settings, collection_prefix=prefix)) as store:
        store.drop_collections()
    with Neo4jStore.connect(settings, namespace=prefix.lower()) as graph:
        graph.clear()


@pytest.fixture(scope="module")
def two_runs(private_stack, home, instance, nlp_path, tmp_path_factory):
    """Two run workers started together while the test holds both pools, released once both are blocked there."""
    settings = stack.up(private_stack)
    prefix = f"Dagster{int(time.time())}"
    work = tmp_path_factory.mktemp("ingest")
    ingest_defs(settings, prefix, work, nlp_path)  # copies the corpus once, before the workers race for it
    storage = instance.event_log_storage
    for pool in POOLS:
        storage.initialize_concurrency_limit_to_default(pool)
        assert storage.claim_concurrency_slot(pool, HOLDER_RUN, f"holder_{pool}", 0).is_claimed
    logs = {name: work / f"{name}.log" for name in ("first", "second")}
    workers = {name: start_worker(settings, home, name, prefix, work, nlp_path, log) for name, log in logs.items()}
    try:
        def both_blocked() -> bool:
            runs = [r for name in workers for r in tagged_runs(instance, name)]
            return len(runs) == 2 and all(set(STORE_STEPS) <= blocked_steps(instance, r.run_id) for r in runs)

        released_after = wait_for(both_blocked, 400, "both runs to block on the pools")
        storage.free_concurrency_slots_for_run(HOLDER_RUN)
        codes = {name: w.wait(timeout=400) for name, w in workers.items()}
    finally:
        storage.free_concurrency_slots_for_run(HOLDER_RUN)
        for w in workers.values():
            if w.poll() is None:
                w.kill()
    runs = {name: tagged_runs(instance, name)[0] for name in workers}
    yield {"settings": settings, "prefix": prefix, "work": work, "runs": runs, "codes": codes,
           "released_after": released_after, "logs": {n: p.read_text(errors="replace") for n, p in logs.items()},
           "defs": ingest_defs(settings, prefix, work, nlp_path)}
    cleanup(settings, prefix)


def test_pools_serialize_the_store_writers_of_concurrent_runs(two_runs, instance, report):
    runs, codes = two_runs["runs"], two_runs["codes"]
    assert codes == {"first": 0, "second": 0}, {n: log[-3000:] for n, log in two_runs["logs"].items()}
    blocked = {name: sorted(blocked_steps(instance, r.run_id)) for name, r in runs.items()}
    windows = {name: step_windows(instance, r.run_id) for name, r in runs.items()}
    overlaps = {}
    for step in STORE_STEPS:
        (a0, a1), (b0, b1) = windows["first"][step], windows["second"][step]
        overlaps[step] = round(max(0.0, min(a1, b1) - max(a0, b0)), 3)
    import pandas as pd

    chunk_ids = set(pd.read_parquet(two_runs["work"] / "artifacts" / "chunks_recursive.parquet")["chunk_id"])
    settings = dataclasses.replace(two_runs["settings"], collection_prefix=two_runs["prefix"])
    with WeaviateStore.connect(settings) as store:
        index = store.chunk_index("recursive")
        count = store.count("recursive")
    report(runs=2, both_succeeded=True, blocked_steps=blocked, released_after_s=round(two_runs["released_after"], 1),
           step_seconds={n: {s: round(b - a, 2) for s, (a, b) in w.items()} for n, w in windows.items()},
           overlap_seconds=overlaps, chunks=len(chunk_ids), objects=count,
           objects_lost=len(chunk_ids - set(index)), duplicates=count - len(index))
    for name in runs:  # both runs reached the store writers while the pools were held: they really contended
        assert set(STORE_STEPS) <= set(blocked[name]), blocked
    assert overlaps == {step: 0.0 for step in STORE_STEPS}, windows
    assert set(index) == chunk_ids and count == len(index)


def _run_texts(instance: DagsterInstance, run_id: str) -> str:
    run = instance.get_run_by_id(run_id)
    parts = [serialize_value(entry) for entry in instance.all_logs(run_id)]
    parts += [serialize_value(run.run_config), serialize_value(run.tags),
              serialize_value(instance.get_job_snapshot(run.job_snapshot_id)),
              serialize_value(instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id))]
    return "\n".join(parts)


def test_secrets_never_leave_the_environment(two_runs, instance, private_stack, report):
    from dagster._core.remote_representation.external_data import RepositorySnap

    key, password = private_stack.weaviate_api_key, private_stack.neo4j_password
    assert len(key) >= 16 and len(password) >= 16
    places = {f"run {name}: events, run config, tags, job and plan snapshots": _run_texts(instance, r.run_id)
              for name, r in two_runs["runs"].items()}
    places |= {f"run worker {name}: stdout and stderr": log for name, log in two_runs["logs"].items()}
    places["repository snapshot the UI shows (resources, jobs, schedules, sensors)"] = serialize_value(
        RepositorySnap.from_def(two_runs["defs"].get_repository_def()))
    places["Settings.public_view()"] = repr(private_stack.public_view())
    places["ragloom stack status"] = repr(stack.status(private_stack))

    wrong = dataclasses.replace(private_stack, weaviate_api_key="wrong-" + key[::-1],
                                neo4j_password="wrong-" + password[::-1])
    errors = {}
    for name, connect in (("weaviate", WeaviateStore.connect), ("neo4j", Neo4jStore.connect)):
        with pytest.raises(StoreError) as failure:
            connect(wrong)
        chain, e = [], failure.value
        while e is not None:
            chain.append(f"{type(e).__name__}: {e!s} {e!r}")
            e = e.__cause__ or e.__context__
        errors[name] = chain[0][:200]
        places[f"{name} auth failure (the whole exception chain)"] = "\n".join(chain)
    for name, module in (("weaviate", weaviate_stack), ("neo4j", neo4j_stack)):
        process = module.process(private_stack)
        if process.pid() is not None:
            places[f"{name} server command line"] = Path(f"/proc/{process.pid()}/cmdline").read_bytes().decode(
                errors="replace")
        places[f"{name} server logs"] = "\n".join(
            p.read_text(errors="replace") for p in process.log_file.parent.rglob("*.log") if p.is_file())

    secrets = {"weaviate api key": key, "neo4j password": password, "a wrong weaviate key": wrong.weaviate_api_key,
               "a wrong neo4j password": wrong.neo4j_password}
    leaks = sorted(f"{what} in {place}" for place, text in places.items() for what, secret in secrets.items()
                   if secret in text)
    report(places_checked=len(places), characters_checked=sum(len(t) for t in places.values()), leaks=leaks,
           auth_errors=errors)
    assert not leaks, leaks
    assert "refused" in errors["neo4j"] and "refused" in errors["weaviate"], errors


def test_the_stack_puts_no_secret_on_a_command_line(tmp_path, monkeypatch):
    """`ps` shows every process's arguments to every local user: neo4j-admin gets the password from a file."""
    settings = dataclasses.replace(Settings(), data_dir=tmp_path)
    password = 'pw with "quotes", a \\ backslash, #hash and @at'
    seen = []

    def record(argv, **kwargs):
        files = [Path(a[1:]) for a in argv if a.startswith("@")]
        seen.append((list(argv), {str(f): (f.read_text(), oct(f.stat().st_mode & 0o777)) for f in files}))
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(neo4j_stack, "java_binary", lambda: "java")
    monkeypatch.setattr(neo4j_stack.subprocess, "run", record)
    neo4j_stack.write_config(settings)
    neo4j_stack.set_initial_password(settings, password)
    (argv, files), = seen
    assert password not in " ".join(argv)
    assert [mode for _, mode in files.values()] == ["0o600"]
    assert not any(Path(f).exists() for f in files)  # removed after use
    env = weaviate_stack.server_env(settings, "the-api-key")
    assert env["AUTHENTICATION_APIKEY_ALLOWED_KEYS"] == "the-api-key"  # in the environment, not in argv


def held_slots(instance: DagsterInstance, run_id: str) -> dict[str, list[str]]:
    return {pool: [s.step_key for s in instance.event_log_storage.get_concurrency_info(pool).claimed_slots
                   if s.run_id == run_id] for pool in POOLS}


def monitoring_pass(instance: DagsterInstance) -> None:
    """One pass of what dagster-daemon's monitoring does: fail runs past their maximum runtime, then free the
    pool slots of runs that ended."""
    import logging
    from types import SimpleNamespace

    from dagster._daemon.monitoring.concurrency import execute_concurrency_slots_iteration
    from dagster._daemon.monitoring.run_monitoring import execute_run_monitoring_iteration

    context = SimpleNamespace(instance=instance, create_request_context=lambda: None)
    logger = logging.getLogger("test-run-monitoring")
    for iteration in (execute_run_monitoring_iteration, execute_concurrency_slots_iteration):
        errors = [e for e in iteration(context, logger) if e is not None]
        assert not errors, errors


def test_a_killed_run_worker_does_not_hold_the_pools(private_stack, home, instance, nlp_path,
                                                      tmp_path_factory, report):
    """SIGKILL a run worker while its vectors step holds the "weaviate" pool. The next nightly or sensor run must
    not wait behind a dead run forever: the instance has to give the slot back (run monitoring failing the run
    after a maximum runtime, then freeing its slots). The DefaultRunLauncher has no worker health check, so that
    takes run_monitoring.max_runtime_seconds (or a dagster/max_runtime tag on the job) and
    run_monitoring.free_slots_after_run_end_seconds in dagster.yaml; without them nothing ever frees the slot.

    The monitoring runs here as the daemon would, on the same storage, under the repo's dagster.yaml with its
    two waiting times (hours and a minute) cut to a second each: what is tested is that the slot is freed."""
    settings = stack.up(private_stack)
    prefix = f"Killed{int(time.time())}"
    work = tmp_path_factory.mktemp("killed")
    worker = start_worker(settings, home, "killed", prefix, work, nlp_path, work / "worker.log")
    try:
        def writing() -> bool:
            runs = tagged_runs(instance, "killed")
            return bool(runs) and any(e.dagster_event.event_type == DagsterEventType.STEP_START
                                      for e in step_events(instance, runs[0].run_id, "vectors_recursive"))

        wait_for(writing, 400, "the vectors step to start")
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
    run = tagged_runs(instance, "killed")[0]
    held_at_kill = held_slots(instance, run.run_id)
    config = yaml.safe_load((home / "dagster.yaml").read_text())
    for key in ("max_runtime_seconds", "free_slots_after_run_end_seconds"):
        if key in config.get("run_monitoring", {}):
            config["run_monitoring"][key] = 1
    (home / "dagster-monitoring.yaml").write_text(yaml.safe_dump(config))
    try:
        with DagsterInstance.from_config(str(home), config_filename="dagster-monitoring.yaml") as monitored:
            def freed() -> bool:
                monitoring_pass(monitored)
                return not any(held_slots(instance, run.run_id).values())

            waited = wait_for(freed, 60, f"run monitoring to free the slots {held_at_kill} of the killed run "
                                         f"{run.run_id}; until then every later ingest run blocks on the pool")
        status = instance.get_run_by_id(run.run_id).status
        report(fault="SIGKILL of a run worker in its vectors step", slots_held_at_kill=held_at_kill,
               run_status_after_monitoring=str(status), freed_after_s=round(waited, 1),
               run_monitoring=instance.run_monitoring_settings)
        assert held_at_kill["weaviate"] == ["vectors_recursive"]  # the kill really left a slot behind
        assert status == DagsterRunStatus.FAILURE
    finally:  # the manual remedy when monitoring did not act, so the rest of the suite can use the pools
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        if not instance.get_run_by_id(run.run_id).is_finished:
            instance.report_run_failed(instance.get_run_by_id(run.run_id), "killed by the reliability test")
        cleanup(settings, prefix)


def test_a_store_down_at_run_start_is_retried_until_it_is_back(private_stack, instance, nlp_path, tmp_path_factory,
                                                               monkeypatch, report):
    """Weaviate is dead when the run starts: the vectors step fails with a StoreError, Dagster's RetryPolicy retries
    it with backoff, Weaviate is restarted meanwhile, and the run completes with every chunk indexed."""
    settings = stack.up(private_stack)
    for name, value in settings_env(settings).items():  # the resources' EnvVars read the secrets from here
        monkeypatch.setenv(name, value)
    prefix = f"Retry{int(time.time())}"
    work = tmp_path_factory.mktemp("retry")
    job = ingest_defs(settings, prefix, work, nlp_path).resolve_job_def("ingest_job")
    weaviate_stack.process(settings).kill()
    restart: dict[str, float] = {}

    def restart_once_retried() -> None:
        def retried() -> bool:
            runs = tagged_runs(instance, prefix)
            return bool(runs) and any(e.dagster_event.event_type == DagsterEventType.STEP_UP_FOR_RETRY
                                      for e in step_events(instance, runs[0].run_id, "vectors_recursive"))

        try:
            wait_for(retried, 300, "the vectors step to fail and be retried")
        finally:
            began = time.monotonic()
            stack.up(settings)
            restart["seconds"] = time.monotonic() - began

    watcher = threading.Thread(target=restart_once_retried, daemon=True)
    watcher.start()
    try:
        result = job.execute_in_process(instance=instance, raise_on_error=False, tags={"test/run": prefix})
    finally:
        watcher.join(timeout=330)
        settings = stack.up(settings)
    events = step_events(instance, result.run_id, "vectors_recursive")
    retries = [e for e in events if e.dagster_event.event_type == DagsterEventType.STEP_UP_FOR_RETRY]
    error = retries[0].dagster_event.event_specific_data.error if retries else None
    cause = (error.cause or error) if error else None
    import pandas as pd

    chunk_ids = set(pd.read_parquet(work / "artifacts" / "chunks_recursive.parquet")["chunk_id"])
    with WeaviateStore.connect(dataclasses.replace(settings, collection_prefix=prefix)) as store:
        index = store.chunk_index("recursive")
    cleanup(settings, prefix)
    report(fault="weaviate down when the run starts", faults_injected=1, survived=result.success,
           retries=len(retries), restart_s=round(restart.get("seconds", 0.0), 1),
           first_error=f"{cause.cls_name}: {cause.message.splitlines()[0][:160]}" if cause else None,
           chunks=len(chunk_ids), objects_lost=len(chunk_ids - set(index)))
    assert retries, "the vectors step never failed: Weaviate was not down when it ran"
    assert "StoreError" in cause.cls_name
    assert result.success
    assert set(index) == chunk_ids
