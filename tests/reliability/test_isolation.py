"""Scope isolation over the real stores: for generated tenant/user/chat/agent layouts, no query (dense, bm25,
hybrid, graph_rag; any scope, adversarial text and filters) ever returns, names or counts anything from a
scope outside the query's ``visible_paths()``; and through every HTTP endpoint of the service, no answer carries
anything from outside the caller's scopes and no request changes another principal's data (end of the module).

Every scope's documents name a person no other scope mentions (its "secret") and a company every scope
mentions, so the entity graph links all scopes together and a graph walk from a visible seed reaches
invisible people: exactly what must not come back.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from reliability_support import STRATEGY, HashEmbedder, people_nlp

from ragloom.api import Ragloom
from ragloom.errors import FilterError, ScopeError
from ragloom.extraction import EntityExtractor
from ragloom.indexing.graph import sync_graph
from ragloom.indexing.vectors import sync_vectors
from ragloom.retrieval.postprocess import GRAPH_SOURCE
from ragloom.types import Chunk, Scope, make_chunk_id

LAYOUT_SEEDS = (11, 23, 37)
QUERIES_PER_LAYOUT = 40
STRATEGIES = ("dense", "bm25", "hybrid", "graph_rag")
FIRST = ["Zelda", "Orin", "Mirela", "Tobias", "Ysolde", "Kasimir", "Anouk", "Leopold", "Sunniva", "Evander",
         "Brigida", "Casimir", "Odalys", "Florian", "Henrike", "Ignatius", "Jolanda", "Lysander", "Marisol", "Quentin"]
LAST = ["Quorvath", "Blenkinsop", "Drummelow", "Vantrees", "Okonkwo", "Szabadi", "Ferreira", "Lindqvist", "Haverkamp",
        "Tremaine", "Castellano", "Mbeki", "Novakova", "Ishikawa", "Delacroix", "Abernathy", "Kowalczyk", "Rasmussen"]
COMPANY = "Globex Corporation"


@dataclass
class Layout:
    seed: int
    scopes: list[Scope]
    secret: dict[str, str] = field(default_factory=dict)  # scope path -> the person only it mentions
    chunks: list[Chunk] = field(default_factory=list)
    scope_of: dict[str, str] = field(default_factory=dict)  # chunk id -> scope path
    documents: dict[str, str] = field(default_factory=dict)  # document id -> scope path


def make_layout(seed: int) -> Layout:
    rng = random.Random(seed)
    scopes = [Scope()]
    for t in range(rng.randint(2, 3)):
        tenant = f"t{t}-{rng.randrange(1000)}"
        scopes.append(Scope(tenant))
        for u in range(rng.randint(1, 2)):
            scopes.append(Scope(tenant, f"u{u}"))
            for c in range(rng.randint(1, 2)):
                scopes.append(Scope(tenant, f"u{u}", f"c{c}"))
                if rng.random() < 0.5:
                    scopes.append(Scope(tenant, f"u{u}", f"c{c}", "agent"))
    names = rng.sample([f"{f} {last}" for f in FIRST for last in LAST], len(scopes))
    layout = Layout(seed, scopes)
    for scope, name in zip(scopes, names, strict=True):
        layout.secret[scope.path] = name
        for d in range(2):
            doc = f"{scope.path}/notes-{d}.md"
            text = (f"{name} leads the Helios budget review at {COMPANY}. Notes {d} of {scope.path}: {name} "
                    f"met {COMPANY} about the Helios budget and the quarterly review.")
            chunk = Chunk(chunk_id=make_chunk_id(doc, STRATEGY, "whole", 0, len(text), text), document_id=doc,
                          strategy=STRATEGY, text=text, start=0, end=len(text), token_count=len(text.split()),
                          position=0, metadata={"title": f"Notes of {name}", "source_path": doc,
                                                "owner": scope.tenant or "shared"}, scope=scope)
            layout.chunks.append(chunk)
            layout.scope_of[chunk.chunk_id] = scope.path
            layout.documents[doc] = scope.path
    return layout


def layout_nlp(layout: Layout):
    """Recognizes the layout's people and the company, at ingestion and in queries alike."""
    return people_nlp(layout.secret.values(), COMPANY)


@pytest.fixture(scope="module", params=LAYOUT_SEEDS, ids=[f"layout{s}" for s in LAYOUT_SEEDS])
def ingested(request, settings, module_weaviate_store_factory, module_neo4j_store_factory):
    """A layout written to both stores under a namespace of its own (removed, and checked gone, after the module);
    the retrieval API over it."""
    layout = make_layout(request.param)
    ns = f"Iso{request.param}x{random.randrange(10**8)}"
    vectors, graph = module_weaviate_store_factory(ns), module_neo4j_store_factory(ns)
    nlp = layout_nlp(layout)
    sync_vectors(vectors, HashEmbedder(), STRATEGY, layout.chunks)
    sync_graph(graph, EntityExtractor(nlp), STRATEGY, layout.chunks)
    return layout, Ragloom(settings, vectors=vectors, graph=graph, embedder=HashEmbedder(), nlp=nlp)


def query_scopes(layout: Layout) -> st.SearchStrategy[Scope]:
    existing = st.sampled_from(layout.scopes)
    # scopes nobody wrote to: a new user next to real ones, a chat of a real user, a tenant that does not exist
    invented = st.sampled_from([Scope(s.tenant, "intruder") for s in layout.scopes if s.tenant]
                               + [Scope(s.tenant, s.user, "new-chat") for s in layout.scopes if s.user]
                               + [Scope("no-such-tenant"), Scope("no-such-tenant", layout.scopes[1].user or "u0")])
    return st.one_of(existing, invented)


def adversarial(layout: Layout, scope: Scope, draw) -> dict | str | None:
    """Filters that try to reach another scope's documents."""
    visible = set(scope.visible_paths())
    others = sorted(d for d, p in layout.documents.items() if p not in visible) or sorted(layout.documents)
    own = sorted(d for d, p in layout.documents.items() if p in visible)
    other = draw(st.sampled_from(others))
    options = [
        None,
        {"document_id": other},
        {"document_id": sorted(layout.documents)},
        {"not": {"document_id": own or ["-"]}},
        {"source_path": {"contains": other.split("/")[0]}},
        {"title": {"contains": "*"}},
        {"title": {"contains": layout.secret[layout.documents[other]]}},
        {"owner": {"not": scope.tenant or "shared"}},
        {"not": {"not": {"document_id": other}}},
        json.dumps({"document_id": other}),
        {"scope_path": layout.documents[other]},  # refused: scope is never a filter
        {"scope_tenant": "x"},
        {"Scope_Path": layout.documents[other]},  # a metadata key no chunk has
    ]
    return draw(st.sampled_from(options))


def visible_names(layout: Layout, scope: Scope) -> tuple[set[str], set[str]]:
    visible = set(scope.visible_paths())
    seen = {name for path, name in layout.secret.items() if path in visible}
    return seen, set(layout.secret.values()) - seen


def run_queries(layout: Layout, rag: Ragloom, check, examples: int, stats: dict) -> dict:
    stats.update({"queries": 0, "items": 0, "refused": 0, "graph_context_items": 0, "leaks": 0, "by_strategy": {}})

    @hypothesis_settings(max_examples=examples, deadline=None, database=None,
                         suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(data=st.data())
    def one(data):
        scope = data.draw(query_scopes(layout))
        strategy = data.draw(st.sampled_from(STRATEGIES))
        target_path = data.draw(st.sampled_from(sorted(layout.secret)))
        target = layout.secret[target_path]
        text = data.draw(st.sampled_from([f"What does {target} lead?", f"{target} {COMPANY}", "Helios budget review",
                                          f"notes of {target} in {target_path}", COMPANY]))
        filters = adversarial(layout, scope, data.draw)
        try:
            result = rag.query(text, strategy=strategy, k=10, filters=filters, scope=scope, abstain=False)
        except (FilterError, ScopeError):
            stats["refused"] += 1
            return
        stats["queries"] += 1
        stats["items"] += len(result.items)
        stats["by_strategy"][strategy] = stats["by_strategy"].get(strategy, 0) + 1
        check(layout, scope, result, stats)

    one()
    return stats


def check_items(layout: Layout, scope: Scope, result, stats) -> None:
    visible = set(scope.visible_paths())
    _, hidden = visible_names(layout, scope)
    for item in result.items:
        if item.metadata.get("source") == GRAPH_SOURCE:
            stats["graph_context_items"] += 1
            assert not [n for n in hidden if n in item.text], (scope.path, item.text)
            continue
        assert layout.scope_of.get(item.chunk_id) in visible, (scope.path, item.chunk_id, item.document_id)
        assert item.metadata.get("scope_path") in visible
        assert not [n for n in hidden if n in item.text]


def test_no_result_comes_from_outside_the_visible_scopes(ingested, report):
    layout, rag = ingested
    stats = run_queries(layout, rag, check_items, QUERIES_PER_LAYOUT, {})
    report(layout_seed=layout.seed, scopes=len(layout.scopes), chunks=len(layout.chunks), **stats)
    assert stats["items"] > 0 and stats["refused"] < stats["queries"] + stats["refused"]


def check_metadata(layout: Layout, scope: Scope, result, stats) -> None:
    """The whole result (items, their metadata, the result's metadata) names no hidden person the query itself did
    not name (the query text and filters are echoed back in the metadata: that is not a leak)."""
    _, hidden = visible_names(layout, scope)
    asked = result.query + json.dumps(result.metadata.filters, default=str)
    blob = json.dumps({"metadata": result.metadata, "items": [i.__dict__ for i in result.items]}, default=str)
    leaked = sorted(n for n in hidden if n in blob and n not in asked)
    stats["leaks"] += bool(leaked)
    assert not leaked, (f"a {result.metadata.get('strategy')} query in scope {scope.path!r} reveals names from "
                        f"other scopes: {leaked} in {json.dumps(result.metadata.get('graph'), default=str)}")


def test_no_result_metadata_names_anything_outside_the_visible_scopes(ingested, report):
    layout, rag = ingested
    stats: dict = {"leaks": 0}
    try:
        # first, for certain: each tenant asks graph_rag about another tenant's person by first name only
        tenants = [s for s in layout.scopes if s.tenant and not s.user]
        for scope, other in zip(tenants, tenants[1:] + tenants[:1], strict=True):
            first_name = layout.secret[other.path].split()[0]
            result = rag.query(f"What does {first_name} do?", strategy="graph_rag", k=10, scope=scope, abstain=False)
            check_metadata(layout, scope, result, stats)
        run_queries(layout, rag, check_metadata, QUERIES_PER_LAYOUT // 2, stats)
    finally:
        report(layout_seed=layout.seed, **stats)


# --- every HTTP endpoint ------------------------------------------------------------------------------------------
# The same property through the service: random principals (tenant keys, user keys, admins, a revoked key, no key,
# a made-up key), random requests to every endpoint, each naming scopes inside and outside the caller's own. Every
# scope's document holds a canary string; what each injection and upload writes holds a fresh one. No answer may
# carry a canary from outside the scopes the request may read (canaries the request itself sent are echoes, not
# leaks), and at the end the stores must hold exactly what the authorized requests changed: nothing else moved,
# appeared or went. A positive control plants a bug in the scope check and expects the oracle to catch it.

HTTP_SEED = 2026
HTTP_REQUESTS = 2400


@dataclass
class Oracle:
    """Where every canary lives now, and what the requests have shown."""

    harness: object
    where: dict[str, str] = field(default_factory=dict)  # canary -> scope path it lives in now
    items: dict[str, str] = field(default_factory=dict)  # injected item id -> scope path (deleted: removed)
    item_canary: dict[str, str] = field(default_factory=dict)
    uploads: dict[str, str] = field(default_factory=dict)  # upload id -> scope path
    by_endpoint: dict[str, int] = field(default_factory=dict)
    statuses: dict[str, dict[int, int]] = field(default_factory=dict)
    leaks: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)

    def readable(self, requested: Scope | None) -> set[str]:
        return set() if requested is None else set(requested.visible_paths())

    def check(self, endpoint: str, sent: str, answer: str, requested: Scope | None) -> None:
        """``requested``: the scope the request may read, or None when it may read nothing."""
        visible = self.readable(requested)
        sent, answer = sent.lower(), answer.lower()
        for canary, path in self.where.items():
            if path not in visible and canary.lower() in answer and canary.lower() not in sent:
                self.leaks.append(f"{endpoint}: {canary} of {path} reached a request that may read {sorted(visible)}")

    def count(self, endpoint: str, status: int) -> None:
        self.by_endpoint[endpoint] = self.by_endpoint.get(endpoint, 0) + 1
        per = self.statuses.setdefault(endpoint, {})
        per[status] = per.get(status, 0) + 1


def _canary(rng: random.Random) -> str:
    return f"CANARY{rng.randrange(16**10):010x}"


def _scope_choices(key, tenants: list[str]) -> list[str | None]:
    """Scopes a request may name: its own and below, a sibling, another tenant, the shared scope, invalid ones."""
    tenant = key.tenant if key else tenants[0]
    user = (key.user if key else "") or "u0"
    sibling = "u1" if user == "u0" else "u0"
    own = key.scope.path if key else tenant
    other_tenant = next(t for t in tenants if t != tenant)
    base = f"{tenant}/{user}"
    return [None, None, own, f"{base}/c0", f"{base}/c0/a0", f"{base}/fresh", f"{base}/c0/other-agent",
            f"{tenant}/{sibling}", f"{tenant}/{sibling}/c0",
            other_tenant, f"{other_tenant}/u0/c0/a0", "__shared__", "../etc", f"{base}/.hidden", "a/b/c/d/e"]


def _requested(key, scope: str | None) -> tuple[Scope | None, int]:
    """(the scope the request may read, or None; the status the scope alone calls for: 0 when allowed)."""
    if key is None or key.revoked:
        return None, 401
    if not scope:
        return key.scope, 0
    try:
        wanted = Scope.from_path(scope)
    except ScopeError:
        return None, 400
    return (wanted, 0) if key.scope.path in wanted.visible_paths() else (None, 403)


def http_round(h, oracle: Oracle, rng: random.Random, n: int) -> None:
    from service_harness import COMPANY as SVC_COMPANY
    from service_harness import TOPIC

    tenants = sorted({k.tenant for k in h.keys})
    layout = h.layout
    all_docs = sorted(layout.documents)
    principals = [*h.keys, None, "made-up"]
    endpoints = ["query"] * 6 + ["ask"] * 2 + ["playground"] * 2 + ["inject"] * 2 + ["delete", "upload", "status",
                                                                                       "promote", "metrics", "health"]
    for _ in range(n):
        who = rng.choice(principals)
        key = who if not isinstance(who, str) and who is not None else None
        secret = key.key if key else ("rlk_0123456789ab_madeup" if who == "made-up" else None)
        auth = {"Authorization": f"Bearer {secret}"} if secret else {}
        endpoint = rng.choice(endpoints)
        scope = rng.choice(_scope_choices(key, tenants))
        requested, scope_status = _requested(key, scope)
        if who == "made-up" or (key is not None and key.revoked) or key is None:
            requested, scope_status = None, 401
        target = rng.choice(sorted(oracle.where))
        text = rng.choice([f"What does {target} lead?", f"{target} {SVC_COMPANY}", TOPIC, SVC_COMPANY,
                           f"notes of {target} {TOPIC}"])
        own_docs = [d for d in all_docs if requested and oracle.where[_doc_canary(d)] in requested.visible_paths()]
        filters = rng.choice([None, None, {"document_id": rng.choice(all_docs)}, {"document_id": all_docs},
                              {"title": {"contains": target}}, {"not": {"document_id": own_docs or ["-"]}},
                              {"source_path": {"contains": "docs"}}, {"title": {"contains": "*"}}])
        strategy = rng.choice(["dense", "bm25", "hybrid", "graph_rag", "adaptive"])
        options = {"abstain": False, **({"router": "rules"} if strategy == "adaptive" else {})}
        body = {"query": text, "strategy": strategy, "k": rng.choice([5, 10, 20]), "options": options,
                **({"scope": scope} if scope else {}), **({"filters": filters} if filters else {})}
        if endpoint in ("query", "ask"):
            r = h.client.post(f"/v1/{endpoint}", json=body, headers=auth)
            sent = json.dumps(body)
        elif endpoint == "playground":
            form = {"query": text, "strategy": strategy, "scope": scope or "", "options": json.dumps(options),
                    **({"key": secret} if secret else {})}
            r = h.client.post("/", data=form)
            sent = json.dumps(form)
        elif endpoint == "inject":
            canary = _canary(rng)
            scope = scope or (key.scope.path if key else tenants[0])  # the field is required: the caller's own
            if key is not None and not key.revoked:
                requested, scope_status = _requested(key, scope)
            body = {"text": f"{canary} joined the {TOPIC} at {SVC_COMPANY}.", "scope": scope}
            r = h.client.post("/v1/inject", json=body, headers=auth)
            sent = json.dumps(body)
            if r.status_code == 201:
                got = Scope.from_path(r.json()["scope"])
                if requested is None or key.scope.path not in got.visible_paths():
                    oracle.wrong.append(f"inject by {key and key.name} into {got.path} succeeded")
                oracle.where[canary] = got.path
                oracle.items[r.json()["item_id"]] = got.path
                oracle.item_canary[r.json()["item_id"]] = canary
        elif endpoint == "delete":
            item = rng.choice(sorted(oracle.items) or ["dyn-000000000000000000000000"])
            r = h.client.delete(f"/v1/inject/{item}", headers=auth)
            sent = item
            if r.status_code == 200:
                if key is None or key.scope.path not in Scope.from_path(oracle.items[item]).visible_paths():
                    oracle.wrong.append(f"{key and key.name} deleted {item} of {oracle.items[item]}")
                oracle.where.pop(oracle.item_canary[item], None)
                del oracle.items[item]
            requested = key.scope if r.status_code == 200 else None
        elif endpoint == "upload":
            canary = _canary(rng)
            query = {"filename": f"{canary}.md", **({"scope": scope} if scope else {})}
            r = h.client.post("/v1/documents", params=query, content=f"# {canary}\n\nnotes".encode(), headers=auth)
            sent = json.dumps(query)
            if r.status_code == 202:
                oracle.uploads[r.json()["upload_id"]] = r.json()["scope"]
                oracle.where[canary] = r.json()["scope"]
                if requested is None or r.json()["scope"] != requested.path:
                    oracle.wrong.append(f"upload by {key and key.name} landed in {r.json()['scope']}")
        elif endpoint == "status":
            upload = rng.choice(sorted(oracle.uploads) or ["up-00000000000000000000"])
            r = h.client.get(f"/v1/documents/{upload}", headers=auth)
            sent = upload
            owned = key is not None and not key.revoked and upload in oracle.uploads and \
                key.scope.path in Scope.from_path(oracle.uploads[upload]).visible_paths()
            requested = Scope.from_path(oracle.uploads[upload]) if owned else None
            if r.status_code == 200 and not owned:
                oracle.wrong.append(f"{key and key.name} read the status of {upload}")
        elif endpoint == "promote":
            doc = rng.choice(all_docs)
            body = {"document_id": doc, "to": rng.choice(["tenant", "shared"])}
            r = h.client.post("/v1/admin/promote", json=body, headers=auth)
            sent = json.dumps(body)
            if r.status_code == 200:
                out = r.json()
                allowed = key is not None and key.admin and not key.user and all(
                    Scope.from_path(p).tenant == key.tenant for p in out["from_scopes"])
                if not allowed:
                    oracle.wrong.append(f"{key and key.name} promoted {doc} from {out['from_scopes']}")
                oracle.where[_doc_canary(doc)] = out["to_scope"]
            requested = key.scope if r.status_code == 200 else None
        elif endpoint == "metrics":
            r = h.client.get("/metrics", headers=auth)
            sent, requested = "", None
        else:
            r = h.client.get(rng.choice(["/healthz", "/readyz", "/"]), headers=auth)
            sent, requested = "", None
        oracle.count(endpoint, r.status_code)
        if endpoint in ("query", "ask", "playground", "inject", "upload"):
            expected = scope_status or None
            if endpoint == "inject" and scope_status == 0 and requested is not None and not requested.chat:
                expected = 400
            if expected is not None and r.status_code != expected:
                oracle.wrong.append(f"{endpoint} by {key and key.name} in {scope!r}: {r.status_code}, "
                                    f"expected {expected}: {r.text[:200]}")
            if r.status_code >= 500:
                oracle.wrong.append(f"{endpoint}: {r.status_code} {r.text[:200]}")
        oracle.check(endpoint, sent, r.text, requested if r.status_code < 400 else None)


def _doc_canary(document_id: str) -> str:
    return "CANARY" + document_id.rsplit("-canary", 1)[1].removesuffix(".md")


def stored_scopes(h, ids: list[str]) -> dict[str, set[str]]:
    from ragloom.filters import Condition

    return {i: h.rag.context.vectors.scope_paths_where(STRATEGY, Condition("document_id", "document_id", "eq", i))
            for i in ids}


@pytest.fixture(scope="module")
def http_service(settings, module_weaviate_store_factory, module_neo4j_store_factory, tmp_path_factory):
    from service_harness import running_service

    tag = f"{random.randrange(10**8)}"
    vectors, graph = module_weaviate_store_factory(f"IsoHttp{tag}"), module_neo4j_store_factory(f"iso_http_{tag}")
    with running_service(settings, vectors, graph, tmp_path_factory.mktemp("iso-http"), seed=HTTP_SEED,
                         service_auth_failures_per_minute=1_000_000) as harness:
        yield harness


def fresh_oracle(h) -> Oracle:
    """Where each layout document is now, as the store says (an earlier run may have promoted some)."""
    oracle = Oracle(h)
    for doc, paths in stored_scopes(h, sorted(h.layout.documents)).items():
        assert len(paths) == 1, (doc, paths)
        oracle.where[_doc_canary(doc)] = paths.pop()
    return oracle


def test_no_http_answer_carries_a_canary_from_outside_the_callers_scopes(http_service, report):
    import time

    h = http_service
    oracle = fresh_oracle(h)
    started = time.perf_counter()
    http_round(h, oracle, random.Random(f"requests-{HTTP_SEED}"), HTTP_REQUESTS)
    seconds = time.perf_counter() - started
    # the stores hold exactly what authorized requests changed
    docs = sorted(h.layout.documents)
    items = sorted(set(oracle.item_canary))
    stored = stored_scopes(h, docs + items)
    for doc in docs:
        assert stored[doc] == {oracle.where[_doc_canary(doc)]}, (doc, stored[doc])
    for item in items:
        assert stored[item] == ({oracle.items[item]} if item in oracle.items else set()), (item, stored[item])
    report(requests=sum(oracle.by_endpoint.values()), seconds=round(seconds, 1), by_endpoint=oracle.by_endpoint,
           statuses=oracle.statuses, leaks=len(oracle.leaks), wrong=len(oracle.wrong),
           injected=len(oracle.item_canary), uploads=len(oracle.uploads))
    assert not oracle.leaks, oracle.leaks[:5]
    assert not oracle.wrong, oracle.wrong[:5]
    assert sum(oracle.by_endpoint.values()) >= HTTP_REQUESTS
    for endpoint in ("query", "ask", "playground", "inject"):  # each door answered some requests with content
        assert oracle.statuses[endpoint].get(200, 0) + oracle.statuses[endpoint].get(201, 0) > 0, oracle.statuses


def test_the_http_oracle_catches_a_planted_leak(http_service, monkeypatch, report):
    """Positive control: with the scope check broken (any requested scope granted), the same generated requests
    must produce answers the oracle flags."""
    from ragloom.service import keys

    def narrow_without_check(self, requested):
        return Scope.from_path(requested) if requested else self.scope

    monkeypatch.setattr(keys.KeyRecord, "narrow", narrow_without_check)
    oracle = fresh_oracle(http_service)
    http_round(http_service, oracle, random.Random(f"control-{HTTP_SEED}"), 120)
    report(requests=sum(oracle.by_endpoint.values()), leaks_found=len(oracle.leaks), first=oracle.leaks[:2])
    assert oracle.leaks, "the oracle missed a planted scope-check bug"


# --- the MCP door ---------------------------------------------------------------------------------------------------
# The same oracle through /mcp: JSON-RPC tools/call requests (search, ask, remember, forget, list_strategies) from
# the same random principals, naming the same scopes. A key refused at the gate gets no tool call at all; a scope
# outside the key's is a tool error; no answer carries a canary the request may not read.

MCP_REQUESTS = 300
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _mcp(h, auth: dict[str, str], tool: str, arguments: dict) -> tuple[int, dict | None, str]:
    """(HTTP status, the tool's structured result or None when refused, the whole answer's text)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    r = h.client.post("/mcp", json=body, headers={**MCP_HEADERS, **auth})
    if r.status_code != 200:
        return r.status_code, None, r.text
    result = r.json().get("result", {})
    if result.get("isError"):
        return 200, None, r.text
    return 200, json.loads(result["content"][0]["text"]), r.text


def mcp_round(h, oracle: Oracle, rng: random.Random, n: int) -> None:
    from service_harness import COMPANY as SVC_COMPANY
    from service_harness import TOPIC

    tenants = sorted({k.tenant for k in h.keys})
    principals = [*h.keys, None, "made-up"]
    tools = ["search"] * 6 + ["ask"] * 2 + ["remember"] * 3 + ["forget", "list_strategies"]
    for _ in range(n):
        who = rng.choice(principals)
        key = who if not isinstance(who, str) and who is not None else None
        secret = key.key if key else ("rlk_0123456789ab_madeup" if who == "made-up" else None)
        auth = {"Authorization": f"Bearer {secret}"} if secret else {}
        tool = rng.choice(tools)
        scope = rng.choice(_scope_choices(key, tenants))
        requested, scope_status = _requested(key, scope)
        target = rng.choice(sorted(oracle.where))
        text = rng.choice([f"What does {target} lead?", f"{target} {SVC_COMPANY}", TOPIC, f"notes of {target}"])
        strategy = rng.choice(["dense", "bm25", "hybrid", "graph_rag"])
        if tool in ("search", "ask"):
            args = {"query": text, "strategy": strategy, "k": rng.choice([5, 10]), "options": {"abstain": False},
                    **({"scope": scope} if scope else {})}
        elif tool == "remember":
            canary = _canary(rng)
            scope = scope or (key.scope.path if key else tenants[0])
            if key is not None and not key.revoked:
                requested, scope_status = _requested(key, scope)
            args = {"text": f"{canary} joined the {TOPIC} at {SVC_COMPANY}.", "scope": scope}
        elif tool == "forget":
            args = {"item_id": rng.choice(sorted(oracle.items) or ["dyn-000000000000000000000000"])}
        else:
            args = {}
        status, out, answer = _mcp(h, auth, tool, args)
        oracle.count(f"mcp:{tool}", status if out is not None or status != 200 else 400)
        refused_at_gate = key is None or key.revoked
        if refused_at_gate != (status == 401):
            oracle.wrong.append(f"mcp {tool} by {key and key.name}: HTTP {status}")
        if out is not None and tool in ("search", "ask", "remember") and (scope_status or requested is None):
            oracle.wrong.append(f"mcp {tool} by {key and key.name} in {scope!r} succeeded (expected {scope_status})")
        if out is not None and tool == "remember":
            got = Scope.from_path(out["scope"])
            oracle.where[canary] = got.path
            oracle.items[out["item_id"]] = got.path
            oracle.item_canary[out["item_id"]] = canary
        if out is not None and tool == "forget":
            item = args["item_id"]
            if key is None or key.scope.path not in Scope.from_path(oracle.items[item]).visible_paths():
                oracle.wrong.append(f"{key and key.name} forgot {item} of {oracle.items[item]}")
            oracle.where.pop(oracle.item_canary[item], None)
            del oracle.items[item]
        readable = requested if tool in ("search", "ask", "remember") else (key.scope if key and out else None)
        oracle.check(f"mcp:{tool}", json.dumps(args), answer, readable if out is not None else None)


def test_no_mcp_answer_carries_a_canary_from_outside_the_callers_scopes(http_service, report):
    h = http_service
    oracle = fresh_oracle(h)
    mcp_round(h, oracle, random.Random(f"mcp-{HTTP_SEED}"), MCP_REQUESTS)
    items = sorted(set(oracle.item_canary))
    stored = stored_scopes(h, items)
    for item in items:
        assert stored[item] == ({oracle.items[item]} if item in oracle.items else set()), (item, stored[item])
    report(requests=sum(oracle.by_endpoint.values()), statuses=oracle.statuses, leaks=len(oracle.leaks),
           wrong=len(oracle.wrong), remembered=len(oracle.item_canary))
    assert not oracle.leaks, oracle.leaks[:5]
    assert not oracle.wrong, oracle.wrong[:5]
    for tool in ("mcp:search", "mcp:ask", "mcp:remember"):  # each tool answered some requests with content
        assert oracle.statuses[tool].get(200, 0) > 0, oracle.statuses


def test_the_mcp_oracle_catches_a_planted_leak(http_service, monkeypatch, report):
    """Positive control for the MCP door: the scope check broken, the oracle must flag answers."""
    from ragloom.service import keys

    def narrow_without_check(self, requested):
        return Scope.from_path(requested) if requested else self.scope

    monkeypatch.setattr(keys.KeyRecord, "narrow", narrow_without_check)
    oracle = fresh_oracle(http_service)
    mcp_round(http_service, oracle, random.Random(f"mcp-control-{HTTP_SEED}"), 120)
    report(requests=sum(oracle.by_endpoint.values()), leaks_found=len(oracle.leaks), first=oracle.leaks[:2])
    assert oracle.leaks, "the oracle missed a planted scope-check bug"
