"""Every script in benchmarks/ still runs, at its smallest size (run_all's ``--smoke`` arguments), against the
real stack, cleanup included. Benchmarks are not run by the suite otherwise, so this is what keeps them from
rotting unseen. Each script runs in its own process with this test's collection prefix, graph namespace and
artifacts folder (so the user's embedding cache is never written), and must leave nothing under them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.integration.conftest import unique_name

BENCHMARKS_DIR = Path(__file__).resolve().parents[2] / "benchmarks"
# A script at its smallest size takes about a minute on an idle 2-core machine (model loads, child processes);
# a loaded one is many times slower, hence the generous limits.
SCRIPT_TIMEOUT_S = 1500
_spec = importlib.util.spec_from_file_location("_ragloom_benchmarks_run_all", BENCHMARKS_DIR / "run_all.py")
run_all = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_all)


def test_run_all_knows_every_script():
    """Every script is either run (and smoke-tested) or listed with the reason it is not."""
    assert not set(run_all.BENCHMARKS) & set(run_all.NOT_RUN)
    assert {p.stem for p in BENCHMARKS_DIR.glob("*.py")} - {"run_all"} == set(run_all.BENCHMARKS) | set(run_all.NOT_RUN)


def _environment(namespace: str, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "RAGLOOM_COLLECTION_PREFIX": namespace, "RAGLOOM_GRAPH_NAMESPACE": namespace.lower(),
            "RAGLOOM_ARTIFACTS_DIR": str(tmp_path / "artifacts"), "PYTHONWARNINGS": "ignore"}


def _left_behind(weaviate_client, neo4j_driver, namespace: str) -> dict[str, object]:
    collections = [n for n in weaviate_client.collections.list_all(simple=True) if n.startswith(namespace)]
    with neo4j_driver.session() as session:
        nodes = session.run("MATCH (n) WHERE n.ns STARTS WITH $ns RETURN count(n) AS n",
                            ns=namespace.lower()).single()["n"]
    return {"collections": collections, "graph nodes": nodes}


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=BENCHMARKS_DIR.parent, env=env, capture_output=True,
                          text=True, timeout=SCRIPT_TIMEOUT_S)


def _clean_up(weaviate_client, neo4j_driver, namespace: str) -> None:
    """A failed script's leftovers must not stay on the shared stack."""
    for collection in _left_behind(weaviate_client, neo4j_driver, namespace)["collections"]:
        weaviate_client.collections.delete(collection)
    with neo4j_driver.session() as session:
        session.run("MATCH (n) WHERE n.ns STARTS WITH $ns DETACH DELETE n", ns=namespace.lower())


# The script the run_all test below runs through run_all (at its smoke size, with the same checks), so it is not
# run a second time on its own.
THROUGH_RUN_ALL = "chunking"


# Most of a script's smoke run is its own process starting, importing and loading models, waits that leave a core
# idle, so the scripts run two at a time, started together by the fixture below; each test then checks its own
# run. The scripts that start servers of their own (ports picked when they start) run alone, after the others.
SIDE_BY_SIDE = 2
ALONE = {"scale_out", "weaviate_write"}
SMOKE_SCRIPTS = sorted(set(run_all.BENCHMARKS) - {THROUGH_RUN_ALL})


class SmokeRuns:
    """The selected scripts' smoke runs: the side-by-side ones started at once on a pool, each under a namespace
    of its own (collections, graph, artifacts)."""

    def __init__(self, selected: list[str], tmp_path_factory: pytest.TempPathFactory) -> None:
        self.namespaces = {name: unique_name() for name in selected}
        self.envs = {name: _environment(ns, tmp_path_factory.mktemp(name)) for name, ns in self.namespaces.items()}
        self._pool = ThreadPoolExecutor(SIDE_BY_SIDE, thread_name_prefix="smoke")
        self._runs: dict[str, Future] = {name: self._pool.submit(_run, self.argv(name), self.envs[name])
                                         for name in selected if name not in ALONE}

    def argv(self, name: str) -> list[str]:
        smoke = run_all.BENCHMARKS[name][2]
        # these keep their collections between runs unless --drop; here they live under the test's prefix
        extra = ["--prefix", f"{self.namespaces[name]}Bench"] if "--prefix" in smoke else []
        return [str(BENCHMARKS_DIR / f"{name}.py"), *smoke, *extra]

    def result(self, name: str) -> subprocess.CompletedProcess:
        if name in ALONE:
            self._pool.shutdown(wait=True)  # the side-by-side runs are over before a script with its own servers
            return _run(self.argv(name), self.envs[name])
        return self._runs[name].result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def smoke_runs(request, settings, weaviate_client, neo4j_driver, tmp_path_factory) -> Iterator[SmokeRuns]:
    """Only the scripts whose tests were selected (``-k`` runs one script, not all of them)."""
    test = test_benchmark_runs_at_its_smallest_size_and_cleans_up.__name__
    selected = [item.callspec.params["name"] for item in request.session.items
                if item.originalname == test and item.module is request.module]
    runs = SmokeRuns(selected, tmp_path_factory)
    try:
        yield runs
    finally:
        runs.close()
        for namespace in runs.namespaces.values():  # a run whose test did not get to its own clean-up
            _clean_up(weaviate_client, neo4j_driver, namespace)


@pytest.mark.timeout(SCRIPT_TIMEOUT_S * 2)
@pytest.mark.parametrize("name", SMOKE_SCRIPTS)
def test_benchmark_runs_at_its_smallest_size_and_cleans_up(name, smoke_runs, weaviate_client, neo4j_driver):
    namespace = smoke_runs.namespaces[name]
    try:
        done = smoke_runs.result(name)
        # exit status 1 with figures and no traceback is a missed target (service_load): a figure, not rot
        missed_target = done.returncode == 1 and "MISS" in done.stdout and "Traceback" not in done.stderr
        assert done.returncode == 0 or missed_target, \
            f"{name} exited {done.returncode}:\n{(done.stdout + done.stderr)[-4000:]}"
        assert done.stdout.strip(), f"{name} printed no figures"
        assert _left_behind(weaviate_client, neo4j_driver, namespace) == {"collections": [], "graph nodes": 0}
    finally:
        _clean_up(weaviate_client, neo4j_driver, namespace)


@pytest.mark.timeout(SCRIPT_TIMEOUT_S + 300)
def test_run_all_smoke_reports_each_script_it_ran(settings, weaviate_client, neo4j_driver, namespace, tmp_path):
    """run_all --smoke on one script: its status record, and the script's own smoke checks (it printed figures
    and left nothing behind)."""
    argv = [str(BENCHMARKS_DIR / "run_all.py"), "--smoke", "--only", THROUGH_RUN_ALL]
    try:
        done = _run(argv, _environment(namespace, tmp_path))
        assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
        records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        assert records[-1]["benchmark"] == THROUGH_RUN_ALL and records[-1]["status"] == "ok", records[-1]
        # run_all echoes the script's output to stderr, each line prefixed with its name
        printed = [line for line in done.stderr.splitlines() if line.startswith(f"  {THROUGH_RUN_ALL} | ")]
        assert any(line.split(" | ", 1)[1].strip() for line in printed), f"{THROUGH_RUN_ALL} printed no figures"
        assert _left_behind(weaviate_client, neo4j_driver, namespace) == {"collections": [], "graph nodes": 0}
    finally:
        _clean_up(weaviate_client, neo4j_driver, namespace)


@pytest.mark.timeout(SCRIPT_TIMEOUT_S)
def test_the_gpu_script_runs_on_the_cpu_at_its_smallest_size(settings, weaviate_client, namespace, tmp_path):
    """gpu_ingest.py is left out of run_all (on a CPU it repeats ingest_vectors), but it is what a device machine
    runs: its plan, rates, cosines and --write path still run here, and it drops the collections it made."""
    argv = [str(BENCHMARKS_DIR / "gpu_ingest.py"), "--documents", "3", "--cpu-sample", "4", "--batches", "",
            "--dtypes", "", "--write", "--write-requests", "1", "--write-processes", "1,2", "--sync-batch", "4",
            "--schemas", "shipped,previous", "--writes-in-flight", "2"]
    done = _run(argv, _environment(namespace, tmp_path))
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    out = done.stdout
    assert "device=auto plan: Plan(backend='onnx-int8', device='cpu'" in out, out
    assert "cosine of auto's vectors to CPU torch fp32" in out and "cosine of auto's vectors to CPU onnx-int8" in out
    assert "shipped schema, 1 writer processes, 2 writes of 1 insert requests" in out, out
    assert "previous schema, 2 writer processes, 2 writes of 1 insert requests" in out, out
    assert not [n for n in weaviate_client.collections.list_all(simple=True) if n.startswith("BenchGpu")]
