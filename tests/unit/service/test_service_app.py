"""The query service's pure parts: keys, scope narrowing, rate limits, metrics text, dynamic items, uploads
layout, coalesced embedding, and the playground's escaping. The HTTP behaviour is tested against a real server
in tests/integration/test_service.py."""

from __future__ import annotations

import json
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragloom import dynamic
from ragloom.embedding.base import Embedder
from ragloom.embedding.batching import CoalescingEmbedder
from ragloom.errors import ConfigError, ForbiddenError, RagloomError, ScopeError
from ragloom.filters import MATCHES_NOTHING, Condition, Not
from ragloom.parsing.sources import scope_from_upload_path
from ragloom.service import intake
from ragloom.service.auth import RateLimiter
from ragloom.service.errors import status_of
from ragloom.service.keys import KeyRecord, KeyStore
from ragloom.service.metrics import ServiceMetrics
from ragloom.service.routers.playground import highlight, subgraph_svg
from ragloom.types import RetrievedItem, Scope

# keys ----------------------------------------------------------------------------------------------------


def test_keys_are_stored_hashed_and_verified(tmp_path):
    store = KeyStore(tmp_path / "keys.json")
    key, record = store.create("acme", "", admin=True)
    text = (tmp_path / "keys.json").read_text()
    assert key not in text and record.key_sha256 in text
    assert stat.S_IMODE((tmp_path / "keys.json").stat().st_mode) == 0o600
    record = KeyStore(tmp_path / "keys.json").lookup(key)  # a second reader (the running service)
    assert record is not None and (record.tenant, record.user, record.admin) == ("acme", "", True)
    assert "key_sha256" not in record.public()
    wrong = key[:-1] + ("A" if key[-1] != "A" else "B")
    for bad in (None, "", wrong, "rlk_" + record.key_id, "Bearer " + key, key + "x"):
        assert store.lookup(bad) is None


def test_revoked_key_stops_working_for_a_reader_that_already_loaded_the_file(tmp_path):
    writer, reader = KeyStore(tmp_path / "k.json"), KeyStore(tmp_path / "k.json")
    key, record = writer.create("acme")
    assert reader.lookup(key) is not None
    time.sleep(0.01)
    writer.revoke(record.key_id)
    assert reader.lookup(key) is None
    with pytest.raises(ConfigError):
        writer.revoke("nope")


@pytest.mark.parametrize("tenant,user", [("", "bob"), ("a/b", ""), ("__shared__", ""), ("acme", "x/y")])
def test_key_principal_parts_are_validated(tmp_path, tenant, user):
    with pytest.raises((ConfigError, ScopeError)):
        KeyStore(tmp_path / "k.json").create(tenant, user)


# scope narrowing -----------------------------------------------------------------------------------------

part = st.sampled_from(["acme", "globex", "alice", "bob", "c1", "c2", "a1"])


@given(tenant=part, user=st.sampled_from(["", "alice", "bob"]),
       requested=st.lists(part, min_size=0, max_size=4).map("/".join))
def test_narrowing_never_leaves_the_principal(tenant, user, requested):
    who = KeyRecord("k", tenant, user, False, 0.0, "")
    try:
        scope = who.narrow(requested)
    except RagloomError as e:
        assert status_of(e) in (400, 403)
        if status_of(e) == 403:
            assert who.scope.path not in Scope.from_path(requested).visible_paths()
        return
    assert who.scope.path in scope.visible_paths()  # at or below the key's own scope
    assert scope.tenant == tenant and (not user or scope.user == user)


def test_narrowing_examples():
    who = KeyRecord("k", "acme", "alice", False, 0.0, "")
    assert who.narrow(None) == Scope("acme", "alice")
    assert who.narrow("acme/alice/c1/agent") == Scope("acme", "alice", "c1", "agent")
    for other in ("acme", "__shared__", "acme/bob", "globex/alice", "acme/alice2"):
        with pytest.raises(ForbiddenError) as e:
            who.narrow(other)
        assert status_of(e.value) == 403
    assert who.owns("acme/alice/c9") and not who.owns("acme/bob/c1") and not who.owns("acme")


def test_rate_limiter_refuses_then_recovers():
    limiter = RateLimiter(per_minute=120)  # 2 per second
    assert all(limiter.take("k") == 0 for _ in range(120))
    wait = limiter.take("k")
    assert 0 < wait <= 0.5
    assert limiter.take("other") == 0  # per key
    time.sleep(wait + 0.05)
    assert limiter.take("k") == 0


def test_metrics_text_is_prometheus_exposition():
    m = ServiceMetrics()
    m.requests.inc("POST", "/v1/query", "200")
    m.query_seconds.observe(0.03, "hybrid")
    m.query_seconds.observe(7.0, "hybrid")
    m.fallbacks.inc('graph"rag')
    text = m.render()
    assert 'ragloom_requests_total{method="POST",route="/v1/query",status="200"} 1' in text
    assert 'ragloom_query_duration_seconds_bucket{strategy="hybrid",le="0.05"} 1' in text
    assert 'ragloom_query_duration_seconds_bucket{strategy="hybrid",le="+Inf"} 2' in text
    assert 'ragloom_query_duration_seconds_count{strategy="hybrid"} 2' in text
    assert 'ragloom_query_fallbacks_total{strategy="graph\\"rag"} 1' in text


# dynamic items -------------------------------------------------------------------------------------------


def test_injected_item_chunks_carry_dynamic_metadata_and_ttl():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    item, chunks = dynamic.build_chunks("tool said 42", Scope("acme", "alice", "c1"), ["recursive", "semantic"],
                                        metadata={"tool": "calc"}, ttl_seconds=60, namespace="notes", now=now)
    assert [c.strategy for c in chunks] == ["recursive", "semantic"]
    assert all(c.document_id == item.item_id and c.text == "tool said 42" for c in chunks)
    assert len({c.chunk_id for c in chunks}) == 2
    meta = chunks[0].metadata
    assert meta["dynamic"] is True and meta["tool"] == "calc" and meta["namespace"] == "notes"
    assert meta["expires_at"] == item.expires_at and (item.expires_at - now).total_seconds() == 60
    assert dynamic.item_strategies(["recursive", "hierarchical", "headered"]) == ["recursive", "headered"]


@pytest.mark.parametrize("kwargs", [{"text": " "}, {"text": "x" * (dynamic.MAX_TEXT_CHARS + 1)},
                                    {"metadata": {"dynamic": False}}, {"metadata": {"Expires At": 1}},
                                    {"ttl_seconds": 0}, {"ttl_seconds": -5}, {"scope": Scope()}])
def test_bad_injections_are_refused(kwargs):
    args = {"text": "fine", "scope": Scope("acme", "u", "c"), **kwargs}
    with pytest.raises(ConfigError):
        dynamic.build_chunks(args.pop("text"), args.pop("scope"), ["recursive"], **args)


def test_visibility_nodes_only_name_fields_that_exist():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert dynamic.visibility_nodes({}, exclude_dynamic=True, now=now) == ()
    both = {"meta_dynamic": "BOOL", "meta_expires_at": "DATE", "meta_namespace": "TEXT"}
    out = dynamic.visibility_nodes(both, exclude_dynamic=True, namespaces=["a"], now=now)
    assert out == (Not(Condition("expires_at", "meta_expires_at", "lt", now)),
                   Not(Condition("dynamic", "meta_dynamic", "eq", True)),
                   Condition("namespace", "meta_namespace", "in", ["a"]))
    # namespaces asked for while no chunk has one: a node that matches nothing, never an error (the old
    # "\x00none" placeholder was refused by the filter language: a 400 that told a caller no tenant had any)
    assert dynamic.visibility_nodes({}, namespaces=["a"]) == (MATCHES_NOTHING,)


# uploads -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", [Scope("acme"), Scope("acme", "alice"), Scope("acme", "alice", "c1"),
                                   Scope("acme", "alice", "c1", "agent7")])
def test_upload_lands_where_the_sensor_reads_its_scope(tmp_path, scope):
    record = intake.save_upload(tmp_path, scope, "../../My Notes!.md", b"# hi\n", title="T", namespace="learning")
    rel = record.document_id.removeprefix("uploads/")
    path = tmp_path / rel
    assert path.read_bytes() == b"# hi\n" and path.parent.resolve().is_relative_to(tmp_path.resolve())
    assert scope_from_upload_path(rel) == Scope(scope.tenant, scope.user, scope.chat)
    sidecar = json.loads(path.with_name(path.name + ".meta.json").read_text())
    assert sidecar["title"] == "T" and sidecar["metadata"] == {"namespace": "learning"}
    assert sidecar.get("scope", scope.path) == scope.path
    assert intake.load_record(tmp_path, record.upload_id) == record
    assert not list(tmp_path.rglob(".*.tmp"))


@pytest.mark.parametrize("name", ["evil.exe", "noext", "x.meta.json", ""])
def test_upload_names_are_checked(tmp_path, name):
    with pytest.raises(ConfigError):
        intake.save_upload(tmp_path, Scope("acme"), name, b"x")


def test_upload_record_ids_cannot_walk_the_filesystem(tmp_path):
    assert intake.load_record(tmp_path, "../../etc/passwd") is None
    assert intake.load_record(tmp_path, "up-" + "0" * 20) is None


# coalesced embedding -------------------------------------------------------------------------------------


class CountingEmbedder(Embedder):
    """A deterministic stand-in model that records its batch sizes (the unit under test is the coalescing)."""

    model_id, dimension, max_tokens = "counting", 8, 128

    def __init__(self) -> None:
        self.calls: list[int] = []

    def encode(self, texts):
        self.calls.append(len(texts))
        time.sleep(0.02)  # a model call takes time: requests pile up meanwhile
        out = np.array([[hash((t, i)) % 97 + 1 for i in range(8)] for t in texts], dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_concurrent_encodes_share_model_calls_and_get_their_own_vectors():
    inner = CountingEmbedder()
    batcher = CoalescingEmbedder(inner)
    texts = [f"query {i}" for i in range(32)]
    try:
        with ThreadPoolExecutor(16) as pool:
            got = list(pool.map(lambda t: batcher.encode([t])[0], texts))
        expected = CountingEmbedder().encode(texts)
        assert np.allclose(np.stack(got), expected)
        assert sum(inner.calls) == 32 and len(inner.calls) < 32 and max(inner.calls) > 1
        assert batcher.requests == 32 and batcher.batches == len(inner.calls)
    finally:
        batcher.close()


def test_a_model_error_reaches_every_waiter_and_the_batcher_goes_on():
    class Failing(CountingEmbedder):
        fail = True

        def encode(self, texts):
            if self.fail:
                self.fail = False
                raise RuntimeError("model broke")
            return super().encode(texts)

    batcher = CoalescingEmbedder(Failing())
    try:
        with pytest.raises(RuntimeError, match="model broke"):
            batcher.encode(["a"])
        assert batcher.encode(["b"]).shape == (1, 8)
        assert threading.active_count() >= 1
    finally:
        batcher.close()


# playground ----------------------------------------------------------------------------------------------


def test_highlight_marks_query_words_and_escapes_everything():
    out = highlight("<b>Neural</b> nets & neural codes", "neural <script>")
    assert out.count("<mark>") == 2 and "<b>" not in out and "&lt;b&gt;" in out and "&amp;" in out
    assert "<script>" not in highlight("x", "<script>alert(1)</script>")


def test_subgraph_svg_draws_edges_and_escapes_names():
    graph = {"nodes": [{"entity_id": "a", "name": "Ada <Lovelace>", "type": "PERSON", "seed": False},
                       {"entity_id": "b", "name": "Charles Babbage", "type": "PERSON", "seed": False},
                       {"entity_id": "l", "name": "London", "type": "GPE", "seed": True}],
             "edges": [{"source": "a", "target": "b", "type": "WORK_WITH", "family": "svo", "chunk_id": "c1"},
                       {"source": "b", "target": "l", "type": "CO_OCCURS", "family": "co_occurs", "chunk_id": "c2"}]}
    item = RetrievedItem("graph:1", "graph:1", "Knowledge graph ...", 0.0,
                         metadata={"source": "graph_rag", "graph": graph})
    svg = subgraph_svg(item)
    assert svg.startswith("<svg") and svg.count('class="edge"') == 2 and svg.count('class="node"') == 3
    assert "Ada &lt;Lovelace&gt;" in svg and "<Lovelace>" not in svg and "#ffd8a8" in svg


def test_json_in_the_page_cannot_close_its_script_element():
    from ragloom.service.routers.playground import _json_script

    out = _json_script("graph-data", {"name": "</script><script>alert(1)</script> & more"})
    assert out.count("</script>") == 1 and "<script>alert" not in out
    assert json.loads(out[out.index(">") + 1: out.rindex("</script>")]) == {
        "name": "</script><script>alert(1)</script> & more"}


def test_graph_view_files_are_ready_only_when_every_bundle_is_whole(tmp_path):
    import dataclasses

    from ragloom.service import docs
    from ragloom.settings import Settings

    settings = dataclasses.replace(Settings.from_env(), cache_dir=tmp_path)
    assert not docs.graph_view_ready(settings)
    for bundle in docs.GRAPH_VIEW:
        folder = docs.assets_dir(settings, bundle)
        folder.mkdir(parents=True)
        for name in bundle.names:
            (folder / name).write_text("/* js */")
    assert docs.graph_view_ready(settings) and not docs.have_assets(settings)  # Swagger UI is a bundle of its own
    (docs.assets_dir(settings, docs.GRAPH_VIEW[0]) / docs.GRAPH_VIEW[0].names[0]).unlink()
    assert not docs.graph_view_ready(settings)


def test_serve_with_several_processes_starts_them_on_the_address_they_read(monkeypatch):
    """Processes build their app from the environment: the address bound is put there for them, and the
    supervisor (``serve_processes``, tested for real in tests/integration/test_service_processes.py) gets it."""
    import dataclasses
    import logging.config
    import os

    from ragloom import service
    from ragloom.settings import Settings

    calls = []
    monkeypatch.setattr(service, "serve_processes", lambda *args, **options: calls.append((args, options)))
    monkeypatch.setattr(logging.config, "dictConfig", lambda config: None)  # the test process keeps its logging
    for name in ("RAGLOOM_SERVICE_HOST", "RAGLOOM_SERVICE_PORT", "RAGLOOM_SERVICE_PROCESSES"):
        monkeypatch.setenv(name, "")  # so the test's end restores each as it was, whatever serve sets
    service.serve(dataclasses.replace(Settings.from_env(), service_processes=3, service_pin_cpus="on"),
                  host="127.0.0.1", port=18999)
    assert calls == [(("127.0.0.1", 18999, 3), {"pin": "on"})]  # the supervisor pins (RAGLOOM_SERVICE_PIN_CPUS)
    assert (os.environ["RAGLOOM_SERVICE_HOST"], os.environ["RAGLOOM_SERVICE_PORT"],
            os.environ["RAGLOOM_SERVICE_PROCESSES"]) == ("127.0.0.1", "18999", "3")
