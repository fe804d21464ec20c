"""One policy at every door: the same unknown strategy, unknown option or out-of-bounds option is the same clear
error from the Python API, the CLI, the HTTP service, the evaluation runner and the query job (tests/dagster:
test_job_options.py), all on the real stack, before anything is searched."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ragloom.errors import QueryError

# (the input, words every door's error carries)
CASES = [
    ({"strategy": "multi_querry"}, ["unknown retrieval strategy 'multi_querry'", "graph_rag", "hybrid"]),
    ({"strategy": "hybrid", "options": {"alpha": 3}}, ["alpha=3", "number 0 to 1"]),
    ({"strategy": "adaptive", "options": {"router_model": "/etc/passwd"}}, ["unknown option 'router_model'"]),
    ({"strategy": "dense", "options": {"lane_multiplier": 10**6}}, ["dense: unknown option 'lane_multiplier'"]),
    ({"strategy": "hybrid", "options": {"lane_multiplier": 10**6}}, ["lane_multiplier", "integer 1 to 20"]),
]


@pytest.fixture(scope="module")
def rag(settings, module_weaviate_store_factory):
    """The API over a collection of its own holding one shared item (so the explicit fallback has something to
    find)."""
    from ragloom import dynamic
    from ragloom.api import Ragloom
    from ragloom.types import Scope

    store = module_weaviate_store_factory()
    with Ragloom(dataclasses.replace(settings, collection_prefix=store.prefix), vectors=store, llm=None) as rag:
        dynamic.inject(store, rag.context.embedder, ["recursive"], "The Data Services team builds HarborSight.",
                       Scope("acme"))
        yield rag


@pytest.mark.parametrize("fields, needles", CASES)
def test_python_api(rag, fields, needles):
    with pytest.raises(QueryError) as e:
        rag.query("who leads HarborSight?", strategy=fields["strategy"], **fields.get("options", {}))
    assert all(n in str(e.value) for n in needles), str(e.value)
    with pytest.raises(QueryError):  # options given as a mapping: the same check
        rag.query("who leads HarborSight?", **fields)
    if "options" not in fields:
        with pytest.raises(QueryError, match="unknown retrieval strategy"):
            rag.warm(fields["strategy"])


@pytest.mark.parametrize("fields, needles", CASES)
def test_cli(settings, capsys, fields, needles):
    from ragloom.cli import main

    args = ["query", "who leads HarborSight?", "--strategy", fields["strategy"]]
    args += [f"--option={k}={v}" for k, v in fields.get("options", {}).items()]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragloom: error:") and all(n in err for n in needles), err


@pytest.mark.parametrize("fields, needles", CASES)
def test_http_service(settings, rag, tmp_path, fields, needles):
    from fastapi.testclient import TestClient

    from ragloom.service.app import create_app
    from ragloom.service.keys import KeyStore

    ours = dataclasses.replace(settings, service_keys_file=tmp_path / "keys.json")
    key, _record = KeyStore(ours.resolved_keys_file).create("acme", "alice")
    with TestClient(create_app(ours, rag=rag)) as client:
        for path in ("/v1/query", "/v1/ask"):
            r = client.post(path, json={"query": "who leads HarborSight?", **fields},
                            headers={"Authorization": f"Bearer {key}"})
            assert r.status_code == 400, r.text
            assert all(n in r.json()["detail"] for n in needles), r.text
        # the explicit fallback, and only it, runs an unknown strategy as dense
        if "options" not in fields:
            r = client.post("/v1/query", json={"query": "who leads HarborSight?", **fields,
                                               "unknown_strategy": "fallback"},
                            headers={"Authorization": f"Bearer {key}"})
            assert r.status_code == 200, r.text
            assert "HarborSight" in r.json()["items"][0]["text"]
            meta = r.json()["metadata"]
            assert meta["strategy"] == "dense" and meta["requested_strategy"] == fields["strategy"]
            assert any(fields["strategy"] in w for w in meta["warnings"])


@pytest.mark.parametrize("fields, needles", CASES)
def test_evaluation_runner(settings, tmp_path, fields, needles):
    from ragloom.evaluation.runner import evaluate

    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "title": "t", "text": "HarborSight is built by Data"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "who builds HarborSight?"}\n')
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    with pytest.raises(QueryError) as e:
        evaluate(str(tmp_path), [fields["strategy"]], ["recursive"], settings, namespace="EvalDoors",
                 query_options=fields.get("options"), baselines=False, log=lambda _m: None)
    assert all(n in str(e.value) for n in needles), str(e.value)


def test_exclude_documents_at_every_door(settings, rag, tmp_path, capsys, monkeypatch):
    """A declared Query field reaches every door from its declaration alone: ``exclude_documents`` (added in one
    commit touching the Query and the retriever base) leaves the named document out at the Python API, the
    HTTP service and the CLI, and a bad value is the same clear error."""
    from fastapi.testclient import TestClient

    from ragloom.cli import main
    from ragloom.service.app import create_app
    from ragloom.service.keys import KeyStore

    question = "who builds HarborSight?"
    found = rag.query(question, strategy="dense", scope="acme/alice")
    assert found.items, "the injected item is found without the field"
    doc = found.items[0].document_id
    gone = rag.query(question, strategy="dense", scope="acme/alice", exclude_documents=[doc])
    assert doc not in {i.document_id for i in gone.items} and gone.metadata.exclude_documents == [doc]
    with pytest.raises(QueryError, match="exclude_documents must be a list of document ids"):
        rag.query(question, exclude_documents=[""])

    ours = dataclasses.replace(settings, service_keys_file=tmp_path / "keys.json")
    key, _record = KeyStore(ours.resolved_keys_file).create("acme", "alice")
    with TestClient(create_app(ours, rag=rag)) as client:
        auth = {"Authorization": f"Bearer {key}"}
        body = {"query": question, "strategy": "dense"}
        assert doc in {i["document_id"] for i in client.post("/v1/query", json=body, headers=auth).json()["items"]}
        r = client.post("/v1/query", json={**body, "exclude_documents": [doc]}, headers=auth)
        assert r.status_code == 200 and doc not in {i["document_id"] for i in r.json()["items"]}, r.text
        r = client.post("/v1/query", json={**body, "exclude_documents": "not a list"}, headers=auth)
        assert r.status_code in (400, 422), r.text

    monkeypatch.setenv("RAGLOOM_COLLECTION_PREFIX", rag.settings.collection_prefix)
    for extra, present in (([], True), (["--exclude-documents", doc], False)):
        assert main(["query", question, "--strategy", "dense", "--scope", "acme/alice", "--json", *extra]) == 0
        items = json.loads(capsys.readouterr().out)["items"]
        assert (doc in {i["document_id"] for i in items}) is present


def test_async_queries_that_walk_the_graph_run_on_their_own_small_pool(rag, monkeypatch):
    """The service's door (``aquery``): graph_rag and multi_hop on RAGLOOM_SERVICE_GRAPH_WORKERS threads of their
    own, every other strategy on the shared pool; the query is checked before it is handed to either."""
    import asyncio
    import threading

    ran_on: dict[str, str] = {}
    monkeypatch.setattr(rag, "retrieve", lambda query: ran_on.setdefault(query.strategy,
                                                                         threading.current_thread().name))

    async def ask_all() -> None:
        for strategy in ("graph_rag", "multi_hop", "hybrid", "adaptive"):
            await rag.aquery("who leads HarborSight?", strategy=strategy)
        with pytest.raises(QueryError, match="unknown retrieval strategy"):
            await rag.aquery("who leads HarborSight?", strategy="multi_querry")

    asyncio.run(ask_all())
    assert {s: name.split("_")[0] for s, name in ran_on.items()} == {
        "graph_rag": "ragloom-graph", "multi_hop": "ragloom-graph", "hybrid": "ragloom-api", "adaptive": "ragloom-api"}
    assert rag._pools["graph"]._max_workers == rag.settings.service_graph_workers
    assert rag._pools["api"]._max_workers == rag.settings.service_workers
