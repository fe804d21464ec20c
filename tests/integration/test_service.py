"""The query service as applications use it: a real `ragloom serve` process on loopback over the real Weaviate
and Neo4j, a corpus ingested by the real ingest job, keys in a real keys file.

Query; inject -> retrievable -> expires and is swept; upload -> indexed by the uploads sensor's run; promotion
visible to the wider scope in both stores; every auth failure code; no cross-tenant read through any endpoint
(hypothesis over principals, scopes and endpoints); keys never in logs or responses; the playground in a
headless Chromium.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import uuid
from pathlib import Path

import dagster as dg
import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from polling import free_port, ragloom_serve, wait_for

from pipelines.definitions import build_defs
from ragloom.service.keys import KeyStore
from ragloom.settings import REPO_ROOT, Settings
from ragloom.stores.neo4j import Neo4jStore
from ragloom.stores.weaviate import WeaviateStore
from ragloom.types import Scope
from resources import CorpusResource, default_resources

STRATEGY = "recursive"
ARTIFACTS = REPO_ROOT / "test-artifacts"
RATE_PER_MINUTE = 240
MAX_BODY = 100_000
# document -> (scope, text); each names a marker word so a query can aim at it
CORPUS = {
    "shared.md": ("", "# Tides\n\nOcean tides follow the moon. Marker word: quillion."),
    "acme.md": ("acme", "# Acme handbook\n\nAcme employees badge in at the north gate. Marker word: quillion."),
    "alice.md": ("acme/alice", "# Alice notes\n\nAlice keeps her quillion budget in a spreadsheet."),
    "alice_chat.md": ("acme/alice/c1", "# Chat upload\n\nThe quillion prototype ships in March, Alice said."),
    "promote_me.md": ("acme/alice/c2", "# Zorbatron memo\n\nThe zorbatron calibration needs two quillion units."),
    "bob.md": ("acme/bob", "# Bob notes\n\nBob thinks the quillion budget is too small."),
    "globex.md": ("globex", "# Globex secrets\n\nGlobex will acquire the quillion factory."),
    "carol.md": ("globex/carol", "# Carol notes\n\nCarol's quillion plan is confidential."),
    "fjord.md": ("acme", "# Field note\n\nCaptain Ingrid Solberg of the research vessel Aurora Borealis met Professor "
                         "Tobias Lindgren in Bergen. They planned a survey of the Hardanger Fjord for the Norwegian "
                         "Polar Institute."),
}
PRINCIPALS = {  # name -> (tenant, user, admin)
    "alice": ("acme", "alice", False), "bob": ("acme", "bob", False), "carol": ("globex", "carol", False),
    "acme_app": ("acme", "", False), "acme_admin": ("acme", "", True), "globex_admin": ("globex", "", True),
}


_wait = functools.partial(wait_for, interval=0.5)


@dataclasses.dataclass
class Service:
    url: str
    root: Path
    settings: Settings
    defs: dg.Definitions
    keys: dict[str, str]
    key_file: Path
    log: Path
    vectors: WeaviateStore
    graph: Neo4jStore
    responses: list[str]

    def client(self, name: str | None = None, key: str | None = None) -> httpx.Client:
        headers = {}
        if name or key:
            headers["Authorization"] = f"Bearer {key or self.keys[name]}"

        def keep(response: httpx.Response) -> None:
            response.read()
            self.responses.append(response.text + json.dumps(dict(response.headers)))

        return httpx.Client(base_url=self.url, headers=headers, timeout=60, event_hooks={"response": [keep]})


def _ingest(defs: dg.Definitions) -> None:
    result = defs.resolve_job_def("ingest_job").execute_in_process(raise_on_error=True)
    assert result.success


@pytest.fixture(scope="module")
def service(settings, module_weaviate_store_factory, module_neo4j_store_factory, tmp_path_factory):
    root = tmp_path_factory.mktemp("service")
    tag = uuid.uuid4().hex[:10]
    prefix, graph_ns = f"TestSvc{tag}", f"test_svc_{tag}"
    docs, uploads = root / "docs", root / "uploads"
    docs.mkdir()
    uploads.mkdir()
    for name, (scope, text) in CORPUS.items():
        (docs / name).write_text(text)
        if scope:
            sidecar = {"scope": scope, "metadata": {"clearance": 5} if name == "globex.md" else {}}
            (docs / f"{name}.meta.json").write_text(json.dumps(sidecar))
    ns_settings = dataclasses.replace(settings, collection_prefix=prefix, graph_namespace=graph_ns,
                                      chunkings=(STRATEGY,), graph_chunkings=(STRATEGY,))
    defs = build_defs(ns_settings, default_resources(root, collection_prefix=prefix, graph_namespace=graph_ns))
    vectors, graph = module_weaviate_store_factory(prefix), module_neo4j_store_factory(graph_ns)
    key_file = root / "keys.json"
    keystore = KeyStore(key_file)
    keys = {name: keystore.create(t, u, admin=a)[0] for name, (t, u, a) in PRINCIPALS.items()}
    port = free_port()
    env = {**os.environ, "RAGLOOM_COLLECTION_PREFIX": prefix, "RAGLOOM_GRAPH_NAMESPACE": graph_ns,
           "RAGLOOM_CHUNKINGS": STRATEGY, "RAGLOOM_GRAPH_CHUNKINGS": STRATEGY, "RAGLOOM_DOCS_DIR": str(docs),
           "RAGLOOM_UPLOADS_DIR": str(uploads), "RAGLOOM_ARTIFACTS_DIR": str(root / "artifacts"),
           "RAGLOOM_SERVICE_KEYS_FILE": str(key_file), "RAGLOOM_SERVICE_SWEEP_SECONDS": "1",
           "RAGLOOM_SERVICE_RATE_PER_MINUTE": str(RATE_PER_MINUTE), "RAGLOOM_SERVICE_MAX_BODY_BYTES": str(MAX_BODY),
           # the local model, when `stack up --llm` provisioned one, answers briefly (a 270M model on busy cores)
           "RAGLOOM_LLM_MAX_TOKENS": "16", "RAGLOOM_LLM_CONTEXT_TOKENS": "300", "RAGLOOM_LLM_TIMEOUT_SECONDS": "150",
           "PYTHONUNBUFFERED": "1"}
    log = root / "service.log"
    try:
        _ingest(defs)
        with ragloom_serve(env, port, log, REPO_ROOT, timeout=180) as url:
            yield Service(url, root, ns_settings, defs, keys, key_file, log, vectors, graph, [])
    finally:
        if log.exists():
            ARTIFACTS.mkdir(exist_ok=True)
            shutil.copy(log, ARTIFACTS / "service.log")


def _query(client: httpx.Client, query: str, **body) -> httpx.Response:
    return client.post("/v1/query", json={"query": query, "k": 10, **body})


def _docs(response: httpx.Response) -> set[str]:
    assert response.status_code == 200, response.text
    return {item["document_id"].removeprefix("docs/") for item in response.json()["items"]}


# query ---------------------------------------------------------------------------------------------------


def test_query_returns_cited_items_within_the_callers_scope(service):
    with service.client("alice") as alice:
        r = _query(alice, "quillion budget", strategy="hybrid", options={"abstain": False})
        body = r.json()
        # her user scope and above; not her chats, not bob's, not globex's
        assert {"shared.md", "acme.md", "alice.md"} <= _docs(r) <= {"shared.md", "acme.md", "alice.md", "fjord.md"}
        item = body["items"][0]
        assert item["rank"] == 1 and item["citation"] and item["title"] and item["span"]["end"] > 0
        assert item["text"] and item["scope"] in ("__shared__", "acme", "acme/alice")
        assert body["metadata"]["strategy"] == "hybrid" and "total" in body["metadata"]["timings_ms"]
        assert _docs(_query(alice, "quillion prototype", scope="acme/alice/c1",
                            options={"abstain": False})) >= {"alice_chat.md"}
        for strategy in ("dense", "bm25", "graph_rag"):
            assert _docs(_query(alice, "quillion", strategy=strategy, options={"abstain": False})) <= {
                "shared.md", "acme.md", "alice.md", "fjord.md"}
        bad = _query(alice, "x", filters={"scope_path": "globex"})
        assert bad.status_code == 400 and "scope" in bad.json()["detail"]
        for sneaky in ({"scope": "globex"}, {"namespaces": ["x"]}, {"filters": {}}, {"nope": 1}):
            assert _query(alice, "x", options=sneaky).status_code == 400, sneaky
        # only globex's documents carry `clearance`: for alice a filter on it must answer exactly like a filter
        # on a key nobody has, or a mistyped one (no error that would reveal globex's schema)
        answers = [_query(alice, "quillion", filters=f, options={"abstain": False})
                   for f in ({"clearance": {"gte": 1}}, {"no_such_key": "x"}, {"clearance": "top secret"})]
        assert [(a.status_code, a.json()["items"]) for a in answers] == [(200, [])] * 3, [a.text for a in answers]
        assert _docs(_query(alice, "quillion", filters={"not": {"no_such_key": "x"}}, options={"abstain": False}))
    with service.client() as anonymous:
        assert anonymous.get("/healthz").json() == {"status": "ok"}
        ready = anonymous.get("/readyz").json()
        assert ready == {"ready": True, "stores": {"weaviate": True, "neo4j": True}}
        page = anonymous.get("/docs")
        assert page.status_code == 200 and "/docs-assets/swagger-ui-bundle.js" in page.text, \
            "Swagger UI must be served from the cache, not a CDN (scripts/web-deps.sh fetches it)"
        assert anonymous.get("/docs-assets/swagger-ui-bundle.js").status_code == 200
        assert "/v1/query" in anonymous.get("/openapi.json").json()["paths"]
        metrics = anonymous.get("/metrics").text
        assert 'ragloom_query_duration_seconds_count{strategy="hybrid"}' in metrics
        assert 'ragloom_requests_total{method="POST",route="/v1/query",status="200"}' in metrics
        assert 'ragloom_errors_total{kind="400"}' in metrics


def _counter(text: str, name: str) -> float:
    """A sample's value in Prometheus text (0 when the series is not there yet)."""
    return next((float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + " ")), 0.0)


def test_metrics_count_adaptive_routes_and_retries(service):
    # each answer's own record (route, tries) says what the counters must have moved by; the nonsense query is
    # retried (no term of it in any document), so retries are counted too
    options = {"router": "rules", "chain": ["hybrid", "dense", "bm25"], "max_retries": 1, "abstain": False}
    queries = ("quillion prototype plan", "zyxqwv plorbination kwemblatz", "fjord")
    with service.client("alice") as alice:
        before = alice.get("/metrics").text
        answers = [_query(alice, q, strategy="adaptive", options=options).json()["metadata"]["adaptive"]
                   for q in queries]
        asked = alice.post("/v1/ask", json={"query": "What is the quillion plan?", "k": 3, "strategy": "adaptive",
                                            "options": options}, timeout=200)
        assert asked.status_code == 200, asked.text
        answers.append(asked.json()["details"]["retrieval"]["adaptive"])  # /v1/ask counts as /v1/query does
        after = alice.get("/metrics").text
    assert len(answers[1]["tries"]) == 2

    def delta(name: str) -> float:
        return _counter(after, name) - _counter(before, name)

    assert delta("ragloom_adaptive_queries_total") == 4
    assert delta("ragloom_adaptive_retried_total") == sum(len(a["tries"]) > 1 for a in answers)
    retried_with = [t["strategy"] for a in answers for t in a["tries"][1:]]
    routed = [a["route"]["strategy"] for a in answers]
    used = [a["used"] for a in answers]
    for strategy in ("hybrid", "dense", "bm25"):
        assert delta(f'ragloom_adaptive_retries_total{{strategy="{strategy}"}}') == retried_with.count(strategy)
        assert delta(f'ragloom_adaptive_routed_total{{strategy="{strategy}"}}') == routed.count(strategy)
        assert delta(f'ragloom_adaptive_used_total{{strategy="{strategy}"}}') == used.count(strategy)


def test_ask_answers_from_the_callers_scope_only(service):
    with service.client("carol") as carol:
        r = carol.post("/v1/ask", json={"query": "What is the quillion plan?", "k": 3, "options": {"abstain": False}},
                       timeout=200)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["context"] and {c["document_id"] for c in body["context"]} <= {
            "docs/shared.md", "docs/globex.md", "docs/carol.md"}
        # the test command starts the local model (`stack up --llm`): the HTTP answer path must run
        assert body["model_configured"] is True and not body["abstained"], body
        details = body["details"]  # the model was called (or its answer served from the cache of an earlier call)
        assert details["cached"] or (details["tokens_in"] > 0 and details["tokens_out"] > 0), details
        assert carol.post("/v1/ask", json={"query": "x", "scope": "acme"}).status_code == 403


# auth ----------------------------------------------------------------------------------------------------


def test_each_auth_failure_has_its_code(service):
    with service.client() as nobody:
        assert _query(nobody, "quillion").status_code == 401
    with service.client(key="rlk_0000_" + "x" * 40) as forged:
        r = _query(forged, "quillion")
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    with service.client("alice") as alice:
        for scope in ("globex", "globex/carol", "acme/bob", "acme", "__shared__", "acme/alice2/c1"):
            assert _query(alice, "quillion", scope=scope).status_code == 403, scope
        assert alice.post("/v1/admin/promote", json={"document_id": "docs/alice.md", "to": "tenant"}).status_code == 403
        big = alice.post("/v1/inject", json={"text": "x" * (MAX_BODY + 10), "scope": "acme/alice/c1"})
        assert big.status_code == 413
        chunked = alice.post("/v1/documents", params={"filename": "big.md"},
                             content=iter([b"y" * 60_000, b"y" * 60_000]))  # no Content-Length: counted
        assert chunked.status_code == 413
    # a key made and revoked while the service runs
    store = KeyStore(service.key_file)
    key, record = store.create("acme", "dave")
    with service.client(key=key) as dave:
        assert _query(dave, "quillion", options={"abstain": False}).status_code == 200
        store.revoke(record.key_id)
        assert _query(dave, "quillion").status_code == 401
    key, _ = store.create("acme", "erin")
    with service.client(key=key) as erin:
        answered = 0
        while (limited := erin.get("/v1/documents/up-00000000000000000000")).status_code == 404:
            answered += 1
            assert answered < 2 * RATE_PER_MINUTE, "no 429"
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
        assert RATE_PER_MINUTE <= answered < 1.5 * RATE_PER_MINUTE  # the bucket, plus what refilled meanwhile


# dynamic injection ---------------------------------------------------------------------------------------


def test_injected_item_is_retrievable_at_once_then_expires_and_is_swept(service):
    text = "Tool result: the flux capacitor reading for order 7781 is 1.21 gigawatts."
    with service.client("alice") as alice, service.client("bob") as bob:
        r = alice.post("/v1/inject", json={"text": text, "scope": "acme/alice/c1", "ttl_seconds": 6,
                                           "metadata": {"tool": "meter"}, "title": "meter reading"})
        assert r.status_code == 201, r.text
        item_id = r.json()["item_id"]
        assert r.json()["expires_at"] and r.json()["scope"] == "acme/alice/c1"
        hit = _query(alice, "flux capacitor reading order 7781", scope="acme/alice/c1").json()["items"]
        assert hit and hit[0]["document_id"] == item_id and hit[0]["dynamic"] is True
        assert hit[0]["metadata"]["meta_tool"] == "meter"
        # the chat's item: not at her user level, not in another chat, not for bob, not when excluded
        for client, scope in ((alice, None), (alice, "acme/alice/c2"), (bob, None)):
            items = _query(client, "flux capacitor reading order 7781", scope=scope,
                           options={"abstain": False}).json()["items"]
            assert item_id not in {i["document_id"] for i in items}
        excluded = _query(alice, "flux capacitor reading order 7781", scope="acme/alice/c1", exclude_dynamic=True,
                          options={"abstain": False}).json()["items"]
        assert item_id not in {i["document_id"] for i in excluded}
        assert bob.post("/v1/inject", json={"text": "x", "scope": "acme/alice/c1"}).status_code == 403
        assert alice.post("/v1/inject", json={"text": "x", "scope": "acme/alice"}).status_code == 400  # not a chat

        def expired_and_swept() -> bool:
            items = _query(alice, "flux capacitor reading order 7781", scope="acme/alice/c1",
                           options={"abstain": False}).json()["items"]
            return item_id not in {i["document_id"] for i in items} and \
                item_id not in service.vectors.chunk_index(STRATEGY).values()

        _wait(expired_and_swept, 30, "the injected item to expire and be swept")
        assert "ragloom_swept_items_total" in alice.get("/metrics").text

        r = alice.post("/v1/inject", json={"text": "Agent note: the customer prefers invoices by post.",
                                           "scope": "acme/alice/c1/agent7"})
        kept = r.json()["item_id"]
        assert r.json()["expires_at"] is None
        assert kept in {i["document_id"] for i in _query(alice, "customer prefers invoices by post",
                                                        scope="acme/alice/c1/agent7").json()["items"]}
        assert bob.delete(f"/v1/inject/{kept}").status_code == 404  # someone else's: as if unknown
        # an ingest run leaves injected items alone
        _ingest(service.defs)
        assert kept in service.vectors.chunk_index(STRATEGY).values()
        deleted = alice.delete(f"/v1/inject/{kept}")
        assert deleted.status_code == 200 and deleted.json()["deleted_chunks"] == 1
        assert kept not in service.vectors.chunk_index(STRATEGY).values()
        assert alice.delete(f"/v1/inject/{kept}").status_code == 404


# uploads -------------------------------------------------------------------------------------------------


def test_upload_is_indexed_by_the_sensors_run_or_rejected_with_its_reason(service):
    uploads = service.root / "uploads"
    with service.client("alice") as alice, service.client("bob") as bob:
        # multipart (curl -F file=@plan.md): the part's file name names the document
        r = alice.post("/v1/documents", params={"scope": "acme/alice/c3", "namespace": "learning",
                                                "title": "Trip plan"},
                       files={"file": ("plan.md", b"# Trip plan\n\nThe vexillology conference is in Oslo this year.")})
        assert r.status_code == 202 and r.json()["status"] == "queued", r.text
        good = r.json()
        assert good["document_id"].endswith("plan.md"), good
        no_file = alice.post("/v1/documents", files={"other": ("a.md", b"x")})
        assert no_file.status_code == 400 and "'file'" in no_file.json()["detail"]
        assert alice.post("/v1/documents", content=b"x").status_code == 400  # a raw body needs ?filename=
        bad = alice.post("/v1/documents", params={"filename": "broken.pdf"},
                         content=b"%PDF-1.4 not really a pdf").json()
        assert alice.get(f"/v1/documents/{good['upload_id']}").json()["status"] == "queued"
        assert bob.get(f"/v1/documents/{good['upload_id']}").status_code == 404
        assert alice.post("/v1/documents", params={"filename": "x.md", "scope": "acme/bob"},
                          content=b"x").status_code == 403
        assert alice.post("/v1/documents", params={"filename": "x.exe"}, content=b"x").status_code == 400

        with dg.instance_for_test() as instance:
            context = dg.build_sensor_context(instance=instance, resources={"corpus": CorpusResource(
                docs_dir=str(service.root / "docs"), uploads_dir=str(uploads))})
            request = service.defs.get_sensor_def("uploads_sensor")(context)
        assert isinstance(request, dg.RunRequest) and request.tags["ragloom/added"] == "3"  # 2 files, 1 sidecar
        _ingest(service.defs)

        status = alice.get(f"/v1/documents/{good['upload_id']}").json()
        assert status["status"] == "indexed" and status["scope"] == "acme/alice/c3"
        rejected = alice.get(f"/v1/documents/{bad['upload_id']}").json()
        assert rejected["status"] == "rejected" and rejected["reason"]
        items = _query(alice, "vexillology conference Oslo", scope="acme/alice/c3",
                       namespaces=["learning"]).json()["items"]
        assert items and items[0]["document_id"] == good["document_id"] and items[0]["title"] == "Trip plan"
        assert not _query(alice, "vexillology conference Oslo", scope="acme/alice/c3", namespaces=["notifications"],
                          options={"abstain": False}).json()["items"]
        assert good["document_id"] not in {i["document_id"] for i in _query(
            bob, "vexillology conference Oslo", options={"abstain": False}).json()["items"]}


# promotion -----------------------------------------------------------------------------------------------


def _graph_scopes(service: Service, document_id: str) -> set[str]:
    rows = service.graph._run(("MATCH (c:Chunk {ns: $ns, document_id: $doc}) RETURN DISTINCT c.scope_path AS s",
                               {"ns": service.graph.namespace, "doc": document_id}))
    return {r["s"] for r in rows}


def test_promotion_reaches_the_wider_scope_in_both_stores(service):
    doc = "docs/promote_me.md"
    query = "zorbatron calibration quillion units"
    with service.client("bob") as bob, service.client("carol") as carol, service.client("acme_admin") as admin, \
            service.client("globex_admin") as other_admin:
        assert "promote_me.md" not in _docs(_query(bob, query, options={"abstain": False}))
        assert _graph_scopes(service, doc) == {"acme/alice/c2"}
        assert other_admin.post("/v1/admin/promote", json={"document_id": doc, "to": "shared"}).status_code == 404
        r = admin.post("/v1/admin/promote", json={"document_id": doc, "to": "tenant"})
        assert r.status_code == 200, r.text
        assert r.json()["from_scopes"] == ["acme/alice/c2"] and r.json()["to_scope"] == "acme"
        assert r.json()["weaviate_objects"] >= 1 and r.json()["neo4j_chunks"] == r.json()["weaviate_objects"]
        assert "promote_me.md" in _docs(_query(bob, query, options={"abstain": False}))
        assert "promote_me.md" not in _docs(_query(carol, query, options={"abstain": False}))
        assert _graph_scopes(service, doc) == {"acme"}
        r = admin.post("/v1/admin/promote", json={"document_id": doc, "to": "shared"})
        assert r.status_code == 200 and r.json()["to_scope"] == "__shared__"
        assert "promote_me.md" in _docs(_query(carol, query, options={"abstain": False}))
        assert _graph_scopes(service, doc) == {"__shared__"}
        assert admin.post("/v1/admin/promote", json={"document_id": doc, "to": "tenant"}).status_code == 404


# isolation -----------------------------------------------------------------------------------------------

SCOPE_PARTS = st.sampled_from(["acme", "globex", "alice", "bob", "carol", "c1", "c2", "agent7"])


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(who=st.sampled_from(sorted(PRINCIPALS)), parts=st.lists(SCOPE_PARTS, max_size=4),
       strategy=st.sampled_from(["dense", "bm25", "hybrid", "graph_rag"]),
       endpoint=st.sampled_from(["query", "playground", "status", "delete", "inject"]))
def test_no_read_leaves_the_keys_principal(service, who, parts, strategy, endpoint):
    tenant, user, _ = PRINCIPALS[who]
    own = Scope(tenant, user)
    requested = "/".join(parts) or None
    allowed = requested is None or own.path in Scope.from_path(requested).visible_paths()
    narrowed = Scope.from_path(requested) if requested and allowed else own
    visible = set(narrowed.visible_paths())
    with service.client(who) as client:
        if endpoint == "query":
            r = _query(client, "quillion budget plan secrets", strategy=strategy, scope=requested,
                       options={"abstain": False})
            assert r.status_code == (200 if allowed else 403)
            if allowed:
                assert {i["scope"] for i in r.json()["items"] if i["scope"]} <= visible
                graph_text = " ".join(i["text"] for i in r.json()["items"] if not i["scope"])
                assert "Globex" not in graph_text or tenant == "globex"
        elif endpoint == "playground":
            form = {"key": service.keys[who], "query": "quillion secrets", "strategy": strategy, "k": "10",
                    "scope": requested or ""}
            page = httpx.post(f"{service.url}/", data=form, timeout=60)
            assert page.status_code == (200 if allowed else 403)
            shown = page.text.split('<section id="results">', 1)[1] if allowed else ""
            foreign = ("Acme", "Alice", "Bob") if tenant == "globex" else ("Globex", "Carol")
            assert not any(word in shown for word in foreign)
        elif endpoint == "status":
            # every upload made so far by anyone: only the owner's subtree answers
            for record in (service.root / "uploads" / ".service").glob("*.json"):
                data = json.loads(record.read_text())
                code = client.get(f"/v1/documents/{data['upload_id']}").status_code
                assert code == (200 if own.path in Scope.from_path(data["scope"]).visible_paths() else 404)
        elif endpoint == "inject":
            r = client.post("/v1/inject", json={"text": "probe", "scope": requested or "", "ttl_seconds": 1})
            if not allowed:
                assert r.status_code == 403
            elif r.status_code == 201:
                assert Scope.from_path(r.json()["scope"]).path in {narrowed.path} and narrowed.chat
            else:
                assert r.status_code == 400
        else:  # someone else's injected item cannot be deleted
            victim = "bob" if who != "bob" else "carol"
            with service.client(victim) as owner:
                t, u, _ = PRINCIPALS[victim]
                made = owner.post("/v1/inject", json={"text": "victim note", "scope": f"{t}/{u}/c9", "ttl_seconds": 30})
                item = made.json()["item_id"]
                code = client.delete(f"/v1/inject/{item}").status_code
                mine = own.path in Scope(t, u, "c9").visible_paths()
                assert code == (200 if mine else 404)
                owner.delete(f"/v1/inject/{item}")


# playground ----------------------------------------------------------------------------------------------


def test_playground_in_headless_chromium_shows_results_and_the_subgraph(service):
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("RAGLOOM_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Debian's chromium is required (scripts/browser-deps.sh installs it)"
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"])
        page = browser.new_page(viewport={"width": 1280, "height": 1100})
        page.goto(service.url + "/")
        page.fill("#key", service.keys["acme_app"])
        page.fill("#query", "Who did Ingrid Solberg meet in Bergen?")
        page.select_option("#strategy", "graph_rag")
        page.fill("#options", '{"abstain": false}')
        page.click("button[type=submit]")
        page.wait_for_selector("#results")
        assert "graph_rag" in page.inner_text("#summary")
        page.wait_for_function("window.ragloomGraph !== undefined")  # the graph view: see test_graph_view.py
        assert page.evaluate("ragloomGraph.cy.nodes().length") >= 2 and page.evaluate("ragloomGraph.cy.edges().length")
        assert "Solberg" in page.text_content("#graph-text")
        marks = [m.lower() for m in page.locator("mark").all_inner_texts()]
        assert "solberg" in marks and "bergen" in marks
        assert "fjord.md" in page.inner_text("#results")  # its citation
        assert page.input_value("#key") == ""  # the key is not written back into the page
        page.screenshot(path=str(ARTIFACTS / "service_playground.png"), full_page=True)
        page.fill("#key", "rlk_nope_nope")
        page.fill("#query", "anything")
        page.click("button[type=submit]")
        assert "API key" in page.inner_text(".error")
        page.goto(service.url + "/docs")  # Swagger UI, rendered from the service's own copy (no CDN here)
        page.wait_for_selector(".opblock-summary-path[data-path='/v1/query']", timeout=30_000)
        browser.close()


# last: what the server wrote and answered ----------------------------------------------------------------


def test_keys_never_appear_in_logs_or_responses(service):
    with service.client("alice") as alice:
        alice.get("/v1/documents/up-00000000000000000000")
    seen = "\n".join(service.responses)
    log = service.log.read_text()
    assert "POST /v1/query" in log  # the access log is there to search
    for name, key in service.keys.items():
        secret = key.split("_", 2)[2]
        assert key not in log and secret not in log, name
        assert key not in seen and secret not in seen, name
    assert not any(k in service.key_file.read_text() for k in service.keys.values())
