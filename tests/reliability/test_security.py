"""The findings of the adversarial probe of the service (issue #28), each as a test over the real stores: a request
that names a file for the server to load, promotion across users, and the low-severity findings (keys in access
logs, nested reserved metadata, upload permissions, the namespaces placeholder, raw store errors, dot-scopes,
temporary files of refused multipart uploads, /metrics, failed-authentication limits), ending with one table of
hostile inputs and the answers they must get.
"""

from __future__ import annotations

import json
import pickle
import uuid
from pathlib import Path

import pytest
from service_harness import running_service

from ragloom.retrieval.routing.features import FEATURE_NAMES, FEATURE_VERSION
from ragloom.types import sha256_hex


@pytest.fixture(scope="module")
def service(settings, module_weaviate_store_factory, module_neo4j_store_factory, tmp_path_factory):
    tag = uuid.uuid4().hex[:8]
    vectors, graph = module_weaviate_store_factory(f"Sec{tag}"), module_neo4j_store_factory(f"sec_{tag}")
    with running_service(settings, vectors, graph, tmp_path_factory.mktemp("security")) as harness:
        yield harness


def error_of(page: str) -> str:
    """The playground's error paragraph."""
    start = page.find('<p class="error">')
    return page[start:page.find("</p>", start)] if start >= 0 else page


def headers(key) -> dict[str, str]:
    return {"Authorization": f"Bearer {key.key}"}


# --- finding 1: a request chose a file for the server to unpickle ---------------------------------------------


class Planted:
    """Unpickling this writes a marker file: proof that the server ran code a request chose."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "unpickled"))


def plant_router(folder: Path) -> tuple[Path, Path]:
    """A pickle and the card the old loader checked it against, in a folder any local user could write."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / "marker.txt"
    blob = pickle.dumps(Planted(marker))
    model = folder / "evil.pkl"
    model.write_bytes(blob)
    model.with_suffix(".json").write_text(json.dumps({
        "feature_version": FEATURE_VERSION, "feature_names": list(FEATURE_NAMES), "strategies": ["dense", "bm25"],
        "model_sha256": sha256_hex(blob)}))
    return model, marker


def test_no_request_names_a_model_file_at_any_door(service, tmp_path, report):
    model, marker = plant_router(tmp_path / "planted")
    key = service.tenant_key(0, "u0")
    answers = {}
    for path in (str(model), "/etc/passwd", str(service.settings.resolved_keys_file), str(tmp_path / "absent.pkl")):
        options = {"router": "learned", "router_model": path}
        body = {"query": f"{service.layout.canary[key.scope.path]} budget", "strategy": "adaptive", "options": options}
        for door, response in (
                ("query", service.client.post("/v1/query", json=body, headers=headers(key))),
                ("ask", service.client.post("/v1/ask", json=body, headers=headers(key))),
                ("playground", service.client.post("/", data={"key": key.key, "query": body["query"],
                                                              "strategy": "adaptive",
                                                              "options": json.dumps(options)}))):
            # the playground echoes the form (the caller's own input) around its error: judge the error alone
            text = error_of(response.text) if door == "playground" else response.text
            answers[(door, path)] = (response.status_code, text)
            assert response.status_code == 400, (door, path, response.status_code, response.text[:300])
            assert "router_model" in text  # the normal unknown-option answer
            for server_path in (str(tmp_path), "/etc", str(service.root), str(service.settings.artifacts_dir)):
                assert server_path not in text, (door, path, text[:300])
    assert not marker.exists(), "the server unpickled a file a request named"
    # no file-existence oracle: a present file, an absent one and a secret one get the same answer per door
    for door in ("query", "ask", "playground"):
        texts = {answers[(door, p)][1].replace(p, "") for p in
                 (str(model), "/etc/passwd", str(service.settings.resolved_keys_file), str(tmp_path / "absent.pkl"))}
        assert len(texts) == 1, (door, texts)
    report(requests=len(answers), statuses=sorted({s for s, _ in answers.values()}))


def test_the_configured_router_loads_without_pickle_and_refuses_a_pickle(service, tmp_path):
    """The router loads only from RAGLOOM_ROUTER_MODEL in the artifacts folder, with skops; a pickle placed there
    (by anyone who can write the folder) is refused without running it, and the refusal names no path."""
    import dataclasses

    from ragloom.retrieval.routing import LearnedRouter, RouterError

    settings = dataclasses.replace(service.settings, artifacts_path=tmp_path / "artifacts")
    target = settings.resolved_router_model
    target.parent.mkdir(parents=True)
    planted, marker = plant_router(tmp_path / "planted")
    target.write_bytes(planted.read_bytes())
    target.with_suffix(".json").write_text(planted.with_suffix(".json").read_text())
    with pytest.raises(RouterError) as refused:
        LearnedRouter.load(target)
    assert not marker.exists() and str(tmp_path) not in str(refused.value)
    source = "\n".join(p.read_text() for p in Path(__file__).resolve().parents[2].joinpath("ragloom").rglob("*.py"))
    assert "pickle.load" not in source and "import pickle" not in source


# --- finding 2: a user-level admin key promoted another user's private document ---------------------------------


def test_admin_keys_are_tenant_wide_and_promotion_stays_inside_the_admins_tenant(service):
    import json as json_

    from ragloom.errors import ConfigError
    from ragloom.service.keys import KeyStore

    store = KeyStore(service.settings.resolved_keys_file)
    with pytest.raises(ConfigError, match="tenant-wide"):
        store.create("acme", "bob", admin=True)
    # a user-level admin record written into the keys file by hand is no admin either
    tenant, layout = service.tenant_key(0, "u1").tenant, service.layout
    key, record = store.create(tenant, "u1")
    raw = json_.loads(service.settings.resolved_keys_file.read_text())
    for r in raw["keys"]:
        if r["key_id"] == record.key_id:
            r["admin"] = True
    service.settings.resolved_keys_file.write_text(json_.dumps(raw))
    alice_private = next(d for d, p in layout.documents.items() if p == f"{tenant}/u0/c0/a0")
    refused = service.client.post("/v1/admin/promote", json={"document_id": alice_private, "to": "tenant"},
                                  headers={"Authorization": f"Bearer {key}"})
    assert refused.status_code == 403, refused.text
    # still private: u1's plain key does not read it
    u1 = service.tenant_key(0, "u1")
    body = {"query": f"{layout.canary[f'{tenant}/u0/c0/a0']} {layout.canary[f'{tenant}/u1']}", "strategy": "bm25",
            "k": 20, "options": {"abstain": False}}
    got = service.client.post("/v1/query", json=body, headers=headers(u1))
    assert got.status_code == 200 and layout.canary[f"{tenant}/u0/c0/a0"] not in got.text.replace(body["query"], "")


def test_promotion_to_shared_takes_only_the_tenants_own_documents(service):
    layout = service.layout
    admin = service.tenant_key(1, "admin")
    tenant = admin.tenant
    private = next(d for d, p in layout.documents.items() if p == f"{tenant}/u1/c0")
    other_tenant = next(d for d, p in layout.documents.items() if p.startswith(service.tenant_key(0, "admin").tenant))
    post = lambda doc, to: service.client.post("/v1/admin/promote", json={"document_id": doc, "to": to},  # noqa: E731
                                               headers=headers(admin))
    assert post(other_tenant, "tenant").status_code == 404
    assert post(other_tenant, "shared").status_code == 404
    direct = post(private, "shared")
    assert direct.status_code == 409 and "tenant first" in direct.json()["detail"], direct.text
    # the deliberate two steps: to the tenant, then to __shared__
    assert post(private, "tenant").json()["to_scope"] == tenant
    assert post(private, "shared").json()["to_scope"] == "__shared__"
    layout.documents[private] = "__shared__"


# --- finding 5 and the hostile-input table ------------------------------------------------------------------------
# Each row: (name, key to send: a principal name or None, method, path, request keywords, the status it must get,
# text the answer must not hold). "{chat}" in a path or body is the caller's own chat scope.

HOSTILE = [
    ("nested reserved metadata", "u0", "POST", "/v1/inject",
     {"json": {"text": "a note", "scope": "{chat}", "metadata": {"_": {"namespace": "payroll"}}}}, 400, ()),
    ("nested reserved title", "u0", "POST", "/v1/inject",
     {"json": {"text": "a note", "scope": "{chat}", "metadata": {"_": {"Title": "forged"}}}}, 400, ()),
]


HOSTILE += [
    # a valid request before any chunk has a namespace: no match, not a 400 that says whether another tenant has one
    ("namespaces before any namespaced data", "u0", "POST", "/v1/query",
     {"json": {"query": "Helios budget review", "strategy": "bm25", "namespaces": ["payroll"]}}, 200, ("CANARY",)),
    ("namespaces with a filter, before any namespaced data", "u0", "POST", "/v1/query",
     {"json": {"query": "Helios budget review", "strategy": "hybrid", "namespaces": ["payroll"],
               "filters": {"document_id": {"not": "x"}}}}, 200, ("CANARY",)),
    ("namespaces with a malformed filter", "u0", "POST", "/v1/query",
     {"json": {"query": "Helios budget review", "namespaces": ["payroll"], "filters": {"year": {"gt": "soon"}}}},
     400, ()),
]


HOSTILE += [
    # hidden folders are never scanned: an upload there would stay queued forever
    ("upload into a dot-scope", "u0", "POST", "/v1/documents?filename=a.md&scope={chat}/.hidden",
     {"content": b"# hidden"}, 400, ()),
    ("query in a dot-scope", "u0", "POST", "/v1/query", {"json": {"query": "x", "scope": "{chat}/.x"}}, 400, ()),
    ("inject into a dot-scope", "u0", "POST", "/v1/inject", {"json": {"text": "x", "scope": "{chat}/.a"}}, 400, ()),
]


def fill(value, chat: str):
    if isinstance(value, str):
        return value.replace("{chat}", chat)
    if isinstance(value, dict):
        return {k: fill(v, chat) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, chat) for v in value]
    return value


@pytest.mark.parametrize("name,who,method,path,kwargs,status,absent", HOSTILE, ids=[row[0] for row in HOSTILE])
def test_hostile_inputs_get_their_answer(service, name, who, method, path, kwargs, status, absent):
    key = service.tenant_key(0, who) if who else None
    chat = f"{key.scope.path}/c0" if key and key.user else ""
    sent = {k: fill(v, chat) for k, v in kwargs.items()}
    if key:
        sent["headers"] = {**sent.get("headers", {}), **headers(key)}
    response = service.client.request(method, fill(path, chat), **sent)
    assert response.status_code == status, (name, response.status_code, response.text[:300])
    for text in (*absent, str(service.root)):
        assert text not in response.text, (name, text)


def test_uploads_are_private_files_in_private_folders(service):
    import os
    import stat

    key = service.tenant_key(0, "u1")
    old = os.umask(0o022)  # the usual umask, which made them 0644 / 0755
    try:
        r = service.client.post(f"/v1/documents?filename=memo.md&title=t&scope={key.scope.path}/c9/ag",
                                content=b"# memo", headers=headers(key))
    finally:
        os.umask(old)
    assert r.status_code == 202, r.text
    uploads = service.settings.resolved_uploads_dir
    written = [p for p in uploads.rglob("*") if r.json()["upload_id"] in p.name]
    assert len(written) == 3  # the file, its sidecar, the record
    modes = {str(p.relative_to(uploads)): stat.S_IMODE(p.stat().st_mode) for p in written}
    assert set(modes.values()) == {0o600}, modes
    folders = [uploads / key.tenant, uploads / key.tenant / key.user, uploads / key.tenant / key.user / "c9",
               uploads / ".service"]
    assert {str(f): oct(stat.S_IMODE(f.stat().st_mode)) for f in folders} == {str(f): "0o700" for f in folders}


def test_refused_multipart_uploads_leave_no_temporary_file_open(service):
    """A refused form's parts are closed by the route, not left to the garbage collector's finalizer (which
    says so with a ResourceWarning: until it runs, each is an open temporary file)."""
    import gc
    import warnings

    key = service.tenant_key(0, "u0")
    big = b"x" * 1_500_000  # over Starlette's in-memory spool: each part is a temporary file on disk
    statuses = set()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for _ in range(4):
            r = service.client.post("/v1/documents", files={"notfile": ("a.md", big)}, headers=headers(key))
            statuses.add(r.status_code)
            r = service.client.post("/v1/documents", files={"file": ("a.exe", big)}, headers=headers(key))
            statuses.add(r.status_code)
        gc.collect()
    assert statuses == {400}, statuses
    unclosed = [str(w.message) for w in caught if "TemporaryFile" in str(w.message)]
    assert not unclosed, unclosed


def test_store_failures_reach_clients_as_a_generic_503_with_a_request_id(service, caplog):
    """A Weaviate that fails (here: a client closed under the service) is a 503 naming a request id; Weaviate's
    own text (collection names, client internals) is in the log under that id, not in the answer."""
    import dataclasses
    import logging

    from fastapi.testclient import TestClient

    from ragloom.api import Ragloom
    from ragloom.service.app import create_app
    from ragloom.stores.weaviate import WeaviateStore

    broken = WeaviateStore.connect(service.settings)
    broken.close()
    rag = Ragloom(service.settings, vectors=broken, graph=service.rag.context.graph()[0],
                  embedder=service.rag.context.embedder, nlp=service.rag.context.nlp, llm=None, hide_schema=True)
    key = service.tenant_key(0, "u0")
    settings = dataclasses.replace(service.settings)
    with caplog.at_level(logging.WARNING, logger="ragloom.service"), \
            TestClient(create_app(settings, rag=rag), raise_server_exceptions=False) as client:
        answers = [client.post("/v1/query", json={"query": "Helios budget", "strategy": s}, headers=headers(key))
                   for s in ("dense", "bm25", "hybrid", "graph_rag")]
        answers.append(client.post("/v1/inject", json={"text": "x", "scope": f"{key.scope.path}/c0"},
                                   headers=headers(key)))
        page = client.post("/", data={"key": key.key, "query": "Helios budget", "strategy": "bm25"})
    for r in answers:
        assert r.status_code == 503, r.text
        body = r.json()
        assert body["request_id"] and r.headers["X-Request-ID"] == body["request_id"]
        for raw in ("Weaviate", "weaviate", "closed", settings.collection_prefix, "Traceback"):
            assert raw not in r.text, (raw, r.text)
        assert any(body["request_id"] in m and "closed" in m.lower() for m in caplog.messages), caplog.messages
    assert page.status_code == 503 and "request id" in error_of(page.text)
    assert "Weaviate" not in error_of(page.text) and settings.collection_prefix not in error_of(page.text)


def test_query_strings_never_reach_the_access_log(service, caplog):
    """A key sent in the URL is refused (401), and neither it nor any other query string is written to the access
    log of a real uvicorn server."""
    import logging
    import threading
    import time

    import httpx
    import uvicorn
    from polling import free_port

    from ragloom.service.app import create_app

    key = service.tenant_key(0, "u0")
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(service.settings, rag=service.rag), host="127.0.0.1",
                                          port=port, log_config=None, access_log=True))
    thread = threading.Thread(target=server.run, daemon=True)
    with caplog.at_level(logging.INFO, logger="uvicorn.access"):
        thread.start()
        deadline = time.monotonic() + 60
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            refused = httpx.get(f"http://127.0.0.1:{port}/healthz?key={key.key}&x=secret-probe", timeout=10)
            query = httpx.post(f"http://127.0.0.1:{port}/v1/query?key={key.key}", json={"query": "x"}, timeout=30)
        finally:
            server.should_exit = True
            thread.join(30)
    assert refused.status_code == 200 and query.status_code == 401
    lines = [r.getMessage() for r in caplog.records if r.name == "uvicorn.access"]
    assert any("/healthz" in line for line in lines) and any("/v1/query" in line for line in lines), lines
    assert not [line for line in lines if key.key in line or "secret-probe" in line or "?" in line], lines


def other_app(service, **overrides):
    """The same stores and keys behind an app with other settings."""
    import dataclasses

    from fastapi.testclient import TestClient

    from ragloom.service.app import create_app

    return TestClient(create_app(dataclasses.replace(service.settings, **overrides), rag=service.rag),
                      raise_server_exceptions=False)


@pytest.mark.parametrize("host,setting,needs_key", [
    ("127.0.0.1", "auto", False), ("::1", "auto", False), ("localhost", "auto", False),
    ("0.0.0.0", "auto", True), ("10.1.2.3", "auto", True), ("ragloom.internal", "auto", True),
    ("0.0.0.0", "open", False), ("127.0.0.1", "key", True)])
def test_metrics_are_keyed_unless_the_service_binds_loopback(service, host, setting, needs_key):
    key = service.tenant_key(1, "app")
    with other_app(service, service_host=host, service_metrics=setting) as client:
        anonymous = client.get("/metrics")
        keyed = client.get("/metrics", headers=headers(key))
        revoked = client.get("/metrics", headers=headers(service.tenant_key(1, "revoked")))
    assert keyed.status_code == 200 and "ragloom_requests_total" in keyed.text
    assert anonymous.status_code == (401 if needs_key else 200)
    assert revoked.status_code == (401 if needs_key else 200)


def test_failed_authentication_is_limited_per_client_address(service):
    good = service.tenant_key(0, "u0")
    with other_app(service, service_auth_failures_per_minute=5) as client:
        bad = [client.post("/v1/query", json={"query": "x"}, headers={"Authorization": f"Bearer rlk_{i:012x}_nope"})
               for i in range(8)]
        playground = client.post("/", data={"key": "rlk_guess_guess", "query": "x"})
        still = client.post("/v1/query", json={"query": "Helios", "strategy": "bm25"}, headers=headers(good))
    assert [r.status_code for r in bad] == [401] * 5 + [429] * 3
    assert int(bad[-1].headers["Retry-After"]) >= 1
    assert playground.status_code == 429
    assert still.status_code == 200  # a valid key is not locked out by someone else's guesses
