"""Faults on a private stack: a server SIGKILLed mid-sync, the syncing process SIGKILLed, concurrent syncs, and
stores that are not there. After each fault a re-run must leave exactly the expected objects: none lost, none
duplicated, none half-written, and nothing marked done that was not written completely.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from polling import free_port, wait_for
from reliability_support import (
    REPO,
    STRATEGY,
    HashEmbedder,
    abstracts,
    environ_without_ragloom,
    make_chunks,
    ruler_nlp,
    settings_env,
)

from ragloom import stack
from ragloom.errors import StoreError
from ragloom.extraction import EntityExtractor
from ragloom.extraction.resolution import voted_type
from ragloom.filters import scope_condition
from ragloom.indexing.graph import sync_graph
from ragloom.indexing.vectors import sync_vectors
from ragloom.retrieval.graph_index import snapshot_cache
from ragloom.settings import Settings
from ragloom.stack import neo4j as neo4j_stack
from ragloom.stack import weaviate as weaviate_stack
from ragloom.stores import cypher
from ragloom.stores.neo4j import Neo4jStore
from ragloom.stores.weaviate import WeaviateStore
from ragloom.types import Chunk

N_VECTORS = 2000  # SciFact abstracts, one chunk each
N_GRAPH = 500
BATCH = 400
WORKER = Path(__file__).with_name("reliability_worker.py")


# --- what the stores hold -------------------------------------------------------------------------------


def vector_state(store: WeaviateStore, chunks: list[Chunk]) -> dict[str, int]:
    """Objects vs the expected chunks: missing, duplicated, foreign, and corrupt (text or vector not the chunk's)."""
    from weaviate.util import generate_uuid5

    expected = {c.chunk_id: c for c in chunks}
    vectors = dict(zip(expected, HashEmbedder().encode([c.embed_text for c in chunks]), strict=True))
    seen: Counter[str] = Counter()
    corrupt = 0
    if store.exists(STRATEGY):
        collection = store.client.collections.use(store.collection_name(STRATEGY))
        for obj in collection.iterator(include_vector=True, return_properties=["chunk_id", "text", "document_id"]):
            cid = obj.properties["chunk_id"]
            seen[cid] += 1
            chunk = expected.get(cid)
            vector = obj.vector.get("default") if isinstance(obj.vector, dict) else obj.vector
            if (chunk is None or str(obj.uuid) != generate_uuid5(cid) or obj.properties["text"] != chunk.text
                    or obj.properties["document_id"] != chunk.document_id or vector is None
                    or float(np.dot(np.asarray(vector, dtype=np.float32), vectors[cid])) < 0.9999):
                corrupt += 1
    return {"expected": len(expected), "objects": store.count(STRATEGY), "distinct": len(seen),
            "missing": len(expected.keys() - seen.keys()), "foreign": len(seen.keys() - expected.keys()),
            "duplicates": sum(n - 1 for n in seen.values()), "corrupt": corrupt}


def assert_exact_vectors(state: dict[str, int]) -> None:
    assert state["objects"] == state["distinct"] == state["expected"], state
    assert state["missing"] == state["foreign"] == state["duplicates"] == state["corrupt"] == 0, state


def expected_graph(chunks: list[Chunk]) -> dict:
    """What a clean sync of ``chunks`` into an empty namespace writes (the extraction is deterministic)."""
    extraction = EntityExtractor(ruler_nlp()).extract(chunks)
    relations: dict[tuple, dict[str, int]] = defaultdict(dict)
    for r in extraction.relations:
        relations[(r.source_id, r.target_id, r.type)][r.chunk_id] = relations[(r.source_id, r.target_id, r.type)].get(
            r.chunk_id, 0) + r.weight
    # the store types an entity by the vote of its mentions' labels and type cues (voted_type), as it writes
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    cues: dict[str, Counter[str]] = defaultdict(Counter)
    for m in extraction.mentions:
        votes[m.entity_id].update(dict(m.labels))
        cues[m.entity_id].update(dict(m.cues))
    return {"chunks": {c.chunk_id: True for c in chunks},
            "entities": {e.entity_id: (e.name, voted_type(votes[e.entity_id], e.type, cues[e.entity_id]))
                         for e in extraction.entities},
            "mentions": {(m.chunk_id, m.entity_id): m.count for m in extraction.mentions},
            "relations": {k: (sum(v.values()), dict(sorted(v.items()))) for k, v in relations.items()}}


def graph_state(driver, ns: str) -> tuple[dict, dict[str, int]]:
    """The namespace's graph in the shape of ``expected_graph``, and the duplicate counts per kind."""
    def rows(query: str) -> list[dict]:
        return [r.data() for r in driver.execute_query(query, ns=ns)[0]]

    chunks = rows("MATCH (c:Chunk) WHERE c.ns = $ns RETURN c.chunk_id AS id, c.extracted AS extracted")
    entities = rows("MATCH (e:Entity) WHERE e.ns = $ns RETURN e.entity_id AS id, e.name AS name, e.type AS type")
    mentions = rows("MATCH (c:Chunk)-[m:MENTIONS]->(e:Entity) WHERE c.ns = $ns "
                    "RETURN c.chunk_id AS chunk, e.entity_id AS entity, m.count AS count")
    relations = rows("MATCH (a:Entity)-[r:RELATED_TO]->(b:Entity) WHERE a.ns = $ns RETURN a.entity_id AS source, "
                     "b.entity_id AS target, r.type AS type, r.weight AS weight, r.chunk_ids AS ids, "
                     "r.chunk_weights AS weights")
    state = {"chunks": {r["id"]: bool(r["extracted"]) for r in chunks},
             "entities": {r["id"]: (r["name"], r["type"]) for r in entities},
             "mentions": {(r["chunk"], r["entity"]): r["count"] for r in mentions},
             "relations": {(r["source"], r["target"], r["type"]): (r["weight"], dict(sorted(zip(r["ids"], r["weights"],
                                                                                               strict=True))))
                           for r in relations}}
    duplicates = {"chunks": len(chunks) - len(state["chunks"]), "entities": len(entities) - len(state["entities"]),
                  "mentions": len(mentions) - len(state["mentions"]),
                  "relations": len(relations) - len(state["relations"]),
                  "evidence": sum(len(r["ids"]) - len(set(r["ids"])) for r in relations)}
    return state, duplicates


def graph_diff(state: dict, expected: dict, duplicates: dict[str, int]) -> dict[str, int]:
    diff = {f"{kind}_missing": len(expected[kind].keys() - state[kind].keys()) for kind in expected}
    diff |= {f"{kind}_extra": len(state[kind].keys() - expected[kind].keys()) for kind in expected}
    diff |= {f"{kind}_wrong": sum(1 for k in expected[kind].keys() & state[kind].keys()
                                  if expected[kind][k] != state[kind][k]) for kind in expected}
    diff |= {f"{kind}_duplicates": n for kind, n in duplicates.items()}
    return diff


def half_written_marked_done(state: dict, expected: dict) -> int:
    """Chunks marked extracted whose mentions are not exactly the expected ones: a lie about being done."""
    by_chunk: dict[str, dict] = defaultdict(dict)
    for (chunk, entity), count in state["mentions"].items():
        by_chunk[chunk][entity] = count
    want: dict[str, dict] = defaultdict(dict)
    for (chunk, entity), count in expected["mentions"].items():
        want[chunk][entity] = count
    return sum(1 for cid, done in state["chunks"].items() if done and by_chunk[cid] != want[cid])


def fast_failing_store(settings: Settings, ns: str, cls: type[Neo4jStore] = Neo4jStore, **kwargs) -> Neo4jStore:
    """A store whose driver gives up on a dead server after 2 s of retries and 2 s to connect, instead of the
    defaults' 30 and 15 s (test speed)."""
    fast = dataclasses.replace(settings, neo4j_retry_seconds=2.0, neo4j_connection_timeout_seconds=2.0)
    return cls.connect(fast, ns, **kwargs)


@contextmanager
def stopped(server: Any) -> Iterator[None]:
    """The server's process stopped (SIGSTOP: it keeps its connections and answers nothing, like a wedged or
    swapping server) for the block, and resumed after it."""
    pid = server.pid()
    assert pid is not None, "the server is not running"
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def failing_read(read: Callable[[], object]) -> tuple[float, StoreError]:
    """(seconds until ``read`` raised, the StoreError it raised)."""
    started = time.perf_counter()
    with pytest.raises(StoreError) as failure:
        read()
    return time.perf_counter() - started, failure.value


def synced_probe(store: WeaviateStore, chunks: list[Chunk]) -> np.ndarray:
    """Sync ``chunks`` into ``store``; returns the first chunk's vector, whose near-vector search finds it first."""
    embedder = HashEmbedder()
    sync_vectors(store, embedder, STRATEGY, chunks, batch_size=BATCH)
    return np.asarray(embedder.encode([chunks[0].embed_text])[0], dtype=np.float32)


@pytest.fixture(scope="module")
def vector_chunks() -> list[Chunk]:
    return make_chunks(abstracts(N_VECTORS))


@pytest.fixture(scope="module")
def graph_chunks() -> list[Chunk]:
    return make_chunks(abstracts(N_GRAPH))


@pytest.fixture(scope="module")
def graph_expected(graph_chunks) -> dict:
    return expected_graph(graph_chunks)


@pytest.fixture
def vectors(live_stack, request):
    """A WeaviateStore on the private stack with a collection prefix of its own, dropped afterwards."""
    prefix = "Fault" + "".join(p.capitalize() for p in request.node.name.split("_")[1:4])
    settings = dataclasses.replace(live_stack, collection_prefix=prefix)
    store = WeaviateStore.connect(settings)
    store.drop_collections()
    yield settings
    with WeaviateStore.connect(stack.up(settings)) as cleanup:
        cleanup.drop_collections()
    store.close()


@pytest.fixture
def graph(live_stack, request):
    """(settings, driver) for a graph namespace of this test's own, cleared afterwards."""
    from neo4j import GraphDatabase

    settings = dataclasses.replace(live_stack, graph_namespace=f"fault_{request.node.name}")
    yield settings
    settings = stack.up(settings)
    driver = GraphDatabase.driver(settings.resolved_neo4j_uri, auth=(settings.neo4j_user, settings.neo4j_password))
    try:
        Neo4jStore(driver, settings.graph_namespace).clear()
    finally:
        driver.close()


def _driver(settings: Settings):
    from neo4j import GraphDatabase

    return GraphDatabase.driver(settings.resolved_neo4j_uri, auth=(settings.neo4j_user, settings.neo4j_password))


def rerun_vectors(settings: Settings, chunks: list[Chunk]) -> tuple[dict, Any, dict]:
    """After a fault: what the collection kept (checked complete and ours: no half-written object survives a
    SIGKILL), a re-run of sync_vectors, and the final state."""
    with WeaviateStore.connect(settings) as store:
        survived = vector_state(store, chunks)
        assert survived["corrupt"] == survived["foreign"] == survived["duplicates"] == 0, survived
        rerun = sync_vectors(store, HashEmbedder(), STRATEGY, chunks, batch_size=BATCH)
        return survived, rerun, vector_state(store, chunks)


def rerun_graph(settings: Settings, chunks: list[Chunk], expected: dict) -> dict:
    """After a fault: what the namespace's graph kept, then a re-run of sync_graph and how far the final graph is
    from a clean sync's (``diff``: all zero when exact)."""
    driver = _driver(settings)
    try:
        survived, _ = graph_state(driver, settings.graph_namespace)
        with Neo4jStore.connect(settings) as store:
            rerun = sync_graph(store, EntityExtractor(ruler_nlp()), STRATEGY, chunks)
        final, duplicates = graph_state(driver, settings.graph_namespace)
    finally:
        driver.close()
    diff = graph_diff(final, expected, duplicates)
    return {"survived": survived, "lied": half_written_marked_done(survived, expected),
            "marked_done": sum(survived["chunks"].values()), "rerun": rerun, "final": final, "diff": diff,
            "objects_lost": sum(diff[f"{kind}_missing"] for kind in expected),
            "duplicates": sum(duplicates.values())}


# --- a server dies in the middle of a sync ----------------------------------------------------------------


@pytest.mark.parametrize("writes_in_flight", [1, 2])  # 2: a many-core machine's default (two batch writes at once)
def test_weaviate_killed_mid_sync_then_rerun_is_exact(vectors, vector_chunks, report, writes_in_flight):
    settings = vectors
    kill_after = 3  # "embedded" progress lines: batch 3 is being written when the server dies
    progress: list[str] = []

    def log(message: str) -> None:
        if "embedded" in message:
            progress.append(message)
            if len(progress) == kill_after:
                weaviate_stack.process(settings).kill()

    store = WeaviateStore.connect(settings)
    started = time.perf_counter()
    with pytest.raises(StoreError) as failure:
        sync_vectors(store, HashEmbedder(), STRATEGY, vector_chunks, batch_size=BATCH, log=log,
                     writes_in_flight=writes_in_flight)
    failed_after = time.perf_counter() - started
    store.close()
    assert len(progress) == kill_after, "the server was not killed mid-run"
    assert "Weaviate" in str(failure.value)

    restart_started = time.perf_counter()
    settings = stack.up(settings)
    restart_seconds = time.perf_counter() - restart_started
    survived, rerun, final = rerun_vectors(settings, vector_chunks)
    report(fault=f"weaviate SIGKILL during sync_vectors write of batch 3 ({writes_in_flight} writes at once)",
           faults_injected=1, survived=True,
           chunks=len(vector_chunks), error=str(failure.value)[:200], failed_after_s=round(failed_after, 2),
           restart_s=round(restart_seconds, 1), objects_before_rerun=survived["objects"],
           rerun_inserted=rerun.inserted, objects=final["objects"], objects_lost=final["missing"],
           duplicates=final["duplicates"], corrupt=final["corrupt"])
    assert rerun.inserted == len(vector_chunks) - survived["distinct"]
    assert_exact_vectors(final)


def test_a_store_opened_after_a_weaviate_restart_answers_at_once(vectors, vector_chunks, report):
    """A store opened once Weaviate is back must answer at once, even while an older store's read is still waiting
    for the server and its connection backs off. gRPC shares connections, and their back-off, between channels to
    one address unless told otherwise: the new store's first call then failed ("failed to connect to all
    addresses" or "Socket closed"), which is how a re-run right after a restart failed."""
    settings = vectors
    chunks = vector_chunks[:20]
    with WeaviateStore.connect(settings) as store:
        vector = synced_probe(store, chunks)
    # the old store waits for the server (reads wait up to the query timeout): long enough for a slow restart
    old = WeaviateStore.connect(dataclasses.replace(settings, weaviate_query_timeout_seconds=60.0))
    waiting: dict[str, Any] = {}

    def old_read() -> None:
        try:
            waiting["answer"] = old.near_vector(STRATEGY, vector, k=3)
        except StoreError as e:
            waiting["error"] = e

    reader = threading.Thread(target=old_read, daemon=True)
    try:
        weaviate_stack.process(settings).kill()
        reader.start()
        time.sleep(8)  # the old read's connection attempts back off meanwhile (1, 1.6 s, ... at most 2 s apart)
        settings = stack.up(settings)
        started = time.perf_counter()
        with WeaviateStore.connect(settings) as new:
            # the re-run repairs what the crash cut from the vector index (sync_vectors' repair_vector_index)
            synced_probe(new, chunks)
            # under the scope filter, as every query runs: a SIGKILL can also leave a node in the HNSW graph that
            # no unfiltered graph search reaches (1 run in 12 of 20 chunks killed and re-synced), which a filtered
            # search over a few objects still finds and the repair's check does not see; that gap is not this
            # test's subject, which is a new store answering at once
            answer = new.near_vector(STRATEGY, vector, k=3, where=scope_condition(chunks[0].scope))
            assert answer[0].chunk_id == chunks[0].chunk_id
        answered_after = time.perf_counter() - started
        reader.join(timeout=90)
    finally:
        old.close()
    report(fault="weaviate SIGKILL, restarted 8 s later, a store opened while an older one backs off",
           faults_injected=1, survived=True, new_store_synced_and_answered_after_s=round(answered_after, 2),
           old_store_read="answered" if "answer" in waiting else str(waiting.get("error"))[:200])
    assert "answer" in waiting, waiting  # the old store's read goes through too, once the server is back


def test_a_weaviate_that_stops_answering_fails_a_read_after_the_query_timeout(vectors, vector_chunks, report):
    """A server that accepts connections and never answers (stopped, swapping, wedged) must not hold a query for
    the client's own 30 s: RAGLOOM_WEAVIATE_QUERY_TIMEOUT_SECONDS bounds each read, the read fails with a
    StoreError, and the same store answers again once the server does."""
    settings = dataclasses.replace(vectors, weaviate_query_timeout_seconds=2.0)
    chunks = vector_chunks[:50]
    with WeaviateStore.connect(settings) as store:
        vector = synced_probe(store, chunks)
        assert store.near_vector(STRATEGY, vector, k=3)[0].chunk_id == chunks[0].chunk_id
        with stopped(weaviate_stack.process(settings)):
            failed_after, error = failing_read(lambda: store.near_vector(STRATEGY, vector, k=3))
        assert store.near_vector(STRATEGY, vector, k=3)[0].chunk_id == chunks[0].chunk_id
    report(fault="weaviate SIGSTOP during a search", faults_injected=1, survived=True,
           failed_after_s=round(failed_after, 2), error=str(error)[:200])
    assert "near_vector" in str(error) and "did not answer in time" in str(error), str(error)
    assert failed_after < 10, f"the read waited {failed_after:.1f}s on a server that did not answer"


def test_a_weaviate_that_is_down_fails_a_read_after_the_query_timeout_and_a_restart_within_it_is_ridden_out(
        vectors, vector_chunks, report):
    """Connections refused: the client's own retries held a read for 63 s (waits of 1, 2, ... 32 s) whatever the
    query timeout. A read now waits for the server (gRPC's waitForReady) up to RAGLOOM_WEAVIATE_QUERY_TIMEOUT_SECONDS:
    on a server that stays down it fails in that time, with the words a silent server gets; a restart within it
    is ridden out, the read answering once the server is back."""
    fast = dataclasses.replace(vectors, weaviate_query_timeout_seconds=3.0)
    patient = dataclasses.replace(vectors, weaviate_query_timeout_seconds=30.0)
    chunks = vector_chunks[:20]
    waited: dict[str, Any] = {}
    with WeaviateStore.connect(fast) as store, WeaviateStore.connect(patient) as waiting_store:
        vector = synced_probe(store, chunks)
        weaviate_stack.process(fast).kill()
        failed_after, error = failing_read(lambda: store.near_vector(STRATEGY, vector, k=3))

        def patient_read() -> None:
            started = time.perf_counter()
            try:
                waited["items"] = len(waiting_store.near_vector(STRATEGY, vector, k=3))
            except StoreError as e:
                waited["error"] = e
            waited["seconds"] = time.perf_counter() - started

        reader = threading.Thread(target=patient_read, daemon=True)
        reader.start()
        time.sleep(1)
        restart_started = time.perf_counter()
        stack.up(fast)
        restart_seconds = time.perf_counter() - restart_started
        reader.join(timeout=60)
        # the crash may have cut the vector index's log (sync_vectors repairs it); the same store answers again
        store.near_vector(STRATEGY, vector, k=3)
    report(fault="weaviate SIGKILL during reads, restarted after one", faults_injected=1, survived=True,
           failed_after_s=round(failed_after, 2), error=str(error)[:200], restart_s=round(restart_seconds, 1),
           patient_read_s=round(waited.get("seconds", -1), 2), patient_read=str(waited.get("error", "answered"))[:200])
    assert "near_vector" in str(error) and "did not answer in time" in str(error), str(error)
    assert failed_after < 10, f"the read waited {failed_after:.1f}s on a server that is down"
    assert "items" in waited, waited  # the restart was ridden out, not an error
    assert waited["seconds"] < 30, waited


def test_a_neo4j_that_stops_answering_fails_a_read_and_a_long_query_still_completes(graph, report):
    """The private Neo4j sends a keep-alive every RAGLOOM_NEO4J_KEEP_ALIVE_SECONDS (1 s here) while it works and
    tells the driver to drop a connection silent for 2 s. So a query that runs longer than that completes (the
    keep-alives keep it alive), and a read on a stopped server fails with a StoreError in bounded time instead
    of holding the caller (Neo4j's own 60 s keep-alive made it wait 120 s, then 60 s more per retry's
    handshake). The same store answers again once the server does."""
    settings = graph
    assert settings.neo4j_keep_alive_seconds == 1
    store = fast_failing_store(settings, settings.graph_namespace)
    try:
        silent_limit = 2 * settings.neo4j_keep_alive_seconds
        count = "UNWIND range(1, $n) AS x WITH x WHERE x % 7919 = -1 RETURN count(*) AS c"  # no row, all work

        def run_count(n: int) -> float:
            started = time.perf_counter()
            assert store._run((count, {"n": n}))[0]["c"] == 0
            return time.perf_counter() - started

        run_count(1_000_000)  # the plan compiled; then this machine's pace, and a query well past the limit
        n = int(10_000_000 / run_count(10_000_000) * (silent_limit + 2))
        for _ in range(4):  # twice as long again if a busy machine made the pace look slower than it is
            took = run_count(n)
            if took > silent_limit + 0.5:
                break
            n *= 2
        assert took > silent_limit + 0.5, f"the long query took {took:.1f}s: not past the {silent_limit}s limit"

        with stopped(neo4j_stack.process(settings)):
            failed_after, error = failing_read(lambda: store.chunk_ids(STRATEGY))
        assert store.chunk_ids(STRATEGY) == set()
    finally:
        store.close()
    report(fault="neo4j SIGSTOP during a read", faults_injected=1, survived=True, long_query_s=round(took, 2),
           failed_after_s=round(failed_after, 2), error=str(error)[:200])
    assert "did not answer in time" in str(error), str(error)
    # the silence limit, then each retry's handshake bounded by the connection timeout, within the 2 s of retries
    assert failed_after < 15, f"the read waited {failed_after:.1f}s on a server that did not answer"


def test_graph_rag_goes_on_from_the_held_graph_while_neo4j_stops_answering(vectors, graph, graph_chunks, report):
    """A stopped Neo4j holds no graph query: the query that finds the held graph version due for a read answers
    from the held graph at once, and the read runs behind it, on its own thread, until the driver's timeouts;
    queries meanwhile answer at once too; once that read has failed, queries say the store did not answer; once
    the store answers again (and a read behind a query has seen it), the note goes."""
    from ragloom.api import Ragloom

    settings = dataclasses.replace(vectors, graph_namespace=graph.graph_namespace, graph_version_seconds=2.0,
                                   neo4j_retry_seconds=2.0, neo4j_connection_timeout_seconds=2.0)
    chunks = [c for c in graph_chunks if sum(w.isupper() and len(w) > 1 for w in c.text.split()) >= 3][:40]
    embedder, nlp = HashEmbedder(), ruler_nlp()
    rag = Ragloom(settings, embedder=embedder, nlp=nlp)
    try:
        sync_vectors(rag.context.vectors, embedder, STRATEGY, chunks, batch_size=BATCH)
        sync_graph(rag.context.graph()[0], EntityExtractor(nlp), STRATEGY, chunks)
        asked = iter(range(1000))

        def ask() -> tuple[float, Any]:  # each query's text its own: no answer comes from the result cache
            started = time.perf_counter()
            text = " ".join(chunks[0].text.split()[:30]) + f" ({next(asked)})"
            result = rag.query(text, strategy="graph_rag", chunking=STRATEGY, k=5, abstain=False)
            return time.perf_counter() - started, result

        _, healthy = ask()
        assert "graph" in healthy.metadata.details and not healthy.metadata.fallbacks, healthy.metadata.fallbacks
        cache = snapshot_cache(rag.context, rag.context.graph()[0])
        with stopped(neo4j_stack.process(settings)):
            time.sleep(2.1)  # the held version is due for a read
            first = ask()
            read_started = time.perf_counter()
            meanwhile = [ask() for _ in range(3)]
            wait_for(lambda: bool(cache.unanswered(STRATEGY)), 20, "the read behind the queries to fail",
                     interval=0.05)
            read_failed_after = time.perf_counter() - read_started
            after = ask()
        time.sleep(2.1)
        ask()  # due again: the read behind it finds the store answering
        wait_for(lambda: not cache.unanswered(STRATEGY), 20, "a version read to succeed again", interval=0.05)
        _, recovered = ask()
    finally:
        rag.close()
    report(fault="neo4j SIGSTOP under graph_rag queries", faults_injected=1, survived=True,
           first_s=round(first[0], 2), meanwhile_s=[round(t, 2) for t, _ in meanwhile],
           read_failed_after_s=round(read_failed_after, 2), after_s=round(after[0], 2),
           note=" ".join(after[1].metadata.fallbacks)[:200])
    for took, result in [first, *meanwhile, after]:
        assert took < 2.0, f"a query waited {took:.1f}s on the stopped store"
        assert "graph" in result.metadata.details  # the walk ran on the held graph
    assert 1.0 < read_failed_after < 20, f"the version read failed after {read_failed_after:.1f}s"
    assert any("graph store did not answer" in f for f in after[1].metadata.fallbacks), after[1].metadata.fallbacks
    assert settings.graph_namespace not in " ".join(after[1].metadata.fallbacks)  # the store's words stay in the log
    assert not any("did not answer" in f for f in recovered.metadata.fallbacks), recovered.metadata.fallbacks


def test_readiness_answers_within_its_timeout_while_neo4j_stops_answering(vectors, graph, report):
    """Ragloom.ready (the service's /readyz) says "not ready" within RAGLOOM_READY_TIMEOUT_SECONDS while Neo4j is
    stopped, instead of waiting out the driver's limits, and probes in a row share the one check still in flight
    rather than leave a stuck thread each; once the server answers, it is ready again."""
    from ragloom.api import Ragloom

    settings = dataclasses.replace(vectors, graph_namespace=graph.graph_namespace, ready_timeout_seconds=1.0,
                                   neo4j_retry_seconds=2.0, neo4j_connection_timeout_seconds=2.0)
    both = {"weaviate": True, "neo4j": True}

    rag = Ragloom(settings, embedder=HashEmbedder())
    started_checks: list[float] = []
    graph_ready = rag._graph_ready

    def counted() -> bool:
        started_checks.append(time.perf_counter())
        return graph_ready()

    rag._graph_ready = counted  # type: ignore[method-assign]
    try:
        assert rag.ready() == both
        probes: list[tuple[float, dict[str, bool]]] = []
        with stopped(neo4j_stack.process(settings)):
            asked = len(started_checks)
            for _ in range(4):
                started = time.perf_counter()
                answer = rag.ready()
                probes.append((time.perf_counter() - started, answer))
            checks = len(started_checks) - asked
        recovered = wait_for(lambda: rag.ready() == both, 30, "ready again once Neo4j answers", interval=0.5)
    finally:
        rag.close()
    report(fault="neo4j SIGSTOP under readiness probes", faults_injected=1, survived=True,
           probe_s=[round(t, 2) for t, _ in probes], neo4j_checks_started=checks)
    for took, answer in probes:
        assert answer == {"weaviate": True, "neo4j": False}, answer
        assert took < 1.8, f"a readiness probe waited {took:.1f}s on the stopped store"
    # a check of the stopped server lasts at least its 2 s silence limit: probes 1 s apart share it
    assert checks < len(probes), f"{checks} checks for {len(probes)} probes: each probe left one stuck"
    assert recovered


def test_neo4j_killed_mid_sync_then_rerun_is_exact(graph, graph_chunks, graph_expected, report):
    settings = graph
    ns = settings.graph_namespace
    kill_at = ("mentions", 2)  # entities written, mentions half written, relations and "extracted" marks not yet
    seen: Counter[str] = Counter()
    names = {cypher.WRITE_MENTIONS: "mentions", cypher.UPSERT_ENTITIES: "entities"}
    killer: list[threading.Timer] = []

    class KillingStore(Neo4jStore):
        def _run(self, query, write=False):
            name = names.get(query[0])
            if write and name:
                seen[name] += 1
                if (name, seen[name]) == kill_at:  # the server dies while this transaction is in flight
                    killer.append(threading.Timer(0.02, neo4j_stack.process(settings).kill))
                    killer[0].start()
            return super()._run(query, write)

    store = fast_failing_store(settings, ns, KillingStore, batch_size=1000)
    started = time.perf_counter()
    with pytest.raises(StoreError) as failure:
        sync_graph(store, EntityExtractor(ruler_nlp()), STRATEGY, graph_chunks)
    failed_after = time.perf_counter() - started
    store.close()
    killer[0].join()
    assert seen["mentions"] >= 2, seen

    restart_started = time.perf_counter()
    settings = stack.up(settings)
    restart_seconds = time.perf_counter() - restart_started
    after = rerun_graph(settings, graph_chunks, graph_expected)
    final = after["final"]
    report(fault="neo4j SIGKILL during the 2nd mentions write of sync_graph", faults_injected=1, survived=True,
           chunks=len(graph_chunks), error=str(failure.value)[:200], failed_after_s=round(failed_after, 2),
           restart_s=round(restart_seconds, 1), chunk_nodes_after_crash=len(after["survived"]["chunks"]),
           marked_done_after_crash=after["marked_done"], half_written_marked_done=after["lied"],
           rerun_chunks_added=after["rerun"].chunks_added, entities=len(final["entities"]),
           mentions=len(final["mentions"]), relations=len(final["relations"]), objects_lost=after["objects_lost"],
           duplicates=after["duplicates"], diff=after["diff"])
    assert after["lied"] == 0
    assert after["rerun"].chunks_added == len(graph_chunks) - after["marked_done"]
    assert not any(after["diff"].values()), after["diff"]


# --- the syncing process dies ---------------------------------------------------------------------------


def _run_and_kill(settings: Settings, args: list[str], marker: str, timeout: float = 240) -> list[str]:
    """Start the worker, SIGKILL it as soon as it prints ``marker``; returns what it printed."""
    env = {**environ_without_ragloom(), **settings_env(settings), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, str(WORKER), *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    watchdog = threading.Timer(timeout, proc.kill)
    watchdog.start()
    try:
        for line in proc.stdout:
            lines.append(line.rstrip())
            if marker in line:
                os.kill(proc.pid, signal.SIGKILL)
                break
        proc.wait(timeout=30)
    finally:
        watchdog.cancel()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL, f"worker ended with {proc.returncode}:\n" + "\n".join(lines[-30:])
    assert not any(line == "done" for line in lines), "the worker finished before it was killed"
    return lines


def test_process_killed_mid_vector_sync_then_rerun_is_exact(vectors, vector_chunks, report):
    settings = vectors
    lines = _run_and_kill(settings, ["vectors", str(N_VECTORS), str(BATCH)], f"embedded {3 * BATCH}/")
    survived, rerun, final = rerun_vectors(settings, vector_chunks)
    report(fault="SIGKILL of the process running sync_vectors after 3 batches", faults_injected=1, survived=True,
           chunks=len(vector_chunks), last_line=lines[-1], objects_before_rerun=survived["objects"],
           rerun_inserted=rerun.inserted, objects=final["objects"], objects_lost=final["missing"],
           duplicates=final["duplicates"], corrupt=final["corrupt"])
    assert 0 < survived["objects"] < len(vector_chunks)
    # The server goes on applying a batch request the killed process had already sent (CI saw 750 objects while
    # the test read the collection and 800 a moment later), so what the re-run found can exceed what the test
    # read; the re-run writes exactly what it found missing and keeps everything that survived.
    assert rerun.inserted + rerun.unchanged == len(vector_chunks)
    assert survived["distinct"] <= rerun.unchanged < len(vector_chunks)
    assert_exact_vectors(final)


def test_process_killed_mid_graph_sync_then_rerun_is_exact(graph, graph_chunks, graph_expected, report):
    settings = graph
    lines = _run_and_kill(settings, ["graph", str(N_GRAPH)], "write mentions 2")
    after = rerun_graph(settings, graph_chunks, graph_expected)
    report(fault="SIGKILL of the process running sync_graph at its 2nd mentions write", faults_injected=1,
           survived=True, chunks=len(graph_chunks), last_line=lines[-1],
           chunk_nodes_after_kill=len(after["survived"]["chunks"]), marked_done_after_kill=after["marked_done"],
           half_written_marked_done=after["lied"], rerun_chunks_added=after["rerun"].chunks_added,
           objects_lost=after["objects_lost"], duplicates=after["duplicates"], diff=after["diff"])
    assert len(after["survived"]["chunks"]) == len(graph_chunks)  # chunk nodes were written before extraction
    assert after["lied"] == 0
    # as with vectors, a commit the killed process had sent may land after the test read the graph: the re-run
    # extracts exactly what it found not done, and keeps at least everything the test saw done
    rerun = after["rerun"]
    assert rerun.chunks_added + rerun.chunks_unchanged == len(graph_chunks)
    assert after["marked_done"] <= rerun.chunks_unchanged < len(graph_chunks)
    assert not any(after["diff"].values()), after["diff"]


# --- two syncs of the same collection or graph at once ------------------------------------------------------


def _concurrently(*calls):
    """Run the calls in threads started together; returns their results (re-raising the first error)."""
    results: list = [None] * len(calls)
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(calls))

    def run(i, call):
        barrier.wait()
        try:
            results[i] = call()
        except BaseException as e:  # noqa: BLE001 - re-raised below in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def test_concurrent_vector_syncs_of_one_collection(vectors, vector_chunks, report):
    """Library level, without Dagster's pools: two syncs of the same chunk set at once (a schedule and a sensor
    run seeing the same corpus) leave exactly that set. Two syncs of different, overlapping sets may each delete
    what the other inserted (each makes the collection "exactly my set"), so the guarantee there is weaker: no
    duplicates, nothing foreign, the intersection kept; the next serialized run restores exactness. Dagster's
    "weaviate" pool serializes the vectors assets (tests/reliability/test_dagster_runs.py)."""
    settings = vectors

    def sync(chunks):
        with WeaviateStore.connect(settings) as store:
            return sync_vectors(store, HashEmbedder(), STRATEGY, chunks, batch_size=BATCH)

    same = _concurrently(lambda: sync(vector_chunks), lambda: sync(vector_chunks))
    with WeaviateStore.connect(settings) as store:
        same_state = vector_state(store, vector_chunks)
        store.drop_collections()

    third = len(vector_chunks) // 3
    a, b = vector_chunks[: 2 * third], vector_chunks[third:]
    _concurrently(lambda: sync(a), lambda: sync(b))
    union = {c.chunk_id for c in vector_chunks}
    both = {c.chunk_id for c in a} & {c.chunk_id for c in b}
    with WeaviateStore.connect(settings) as store:
        index = store.chunk_index(STRATEGY)
        overlap_state = vector_state(store, vector_chunks)
        settled = sync_vectors(store, HashEmbedder(), STRATEGY, b, batch_size=BATCH)
        settled_state = vector_state(store, b)
    outcome = ("union" if set(index) == union else "a" if set(index) == {c.chunk_id for c in a}
               else "b" if set(index) == {c.chunk_id for c in b} else "other")
    report(fault="two concurrent sync_vectors on one collection", same_set_inserted=[r.inserted for r in same],
           same_set_objects=same_state["objects"], same_set_duplicates=same_state["duplicates"],
           same_set_lost=same_state["missing"], overlap_objects=overlap_state["objects"], overlap_outcome=outcome,
           overlap_duplicates=overlap_state["duplicates"], overlap_foreign=overlap_state["foreign"],
           next_run_inserted=settled.inserted, next_run_deleted=settled.deleted,
           objects_lost=same_state["missing"] + settled_state["missing"],
           duplicates=same_state["duplicates"] + overlap_state["duplicates"] + settled_state["duplicates"])
    assert_exact_vectors(same_state)
    assert sum(r.inserted for r in same) >= len(vector_chunks)  # both wrote; uuid5 ids made it one set
    assert overlap_state["duplicates"] == overlap_state["foreign"] == overlap_state["corrupt"] == 0, overlap_state
    assert both <= set(index), "a chunk both runs wanted was deleted"
    assert_exact_vectors(settled_state)


def test_concurrent_graph_syncs_of_one_namespace(graph, graph_chunks, graph_expected, report):
    """Two sync_graph runs of the same chunks at once: MERGE under the namespace keys, evidence counted once."""
    settings = graph

    def sync():
        with Neo4jStore.connect(settings) as store:
            return sync_graph(store, EntityExtractor(ruler_nlp()), STRATEGY, graph_chunks)

    reports = _concurrently(sync, sync)
    driver = _driver(settings)
    try:
        final, duplicates = graph_state(driver, settings.graph_namespace)
    finally:
        driver.close()
    diff = graph_diff(final, graph_expected, duplicates)
    report(fault="two concurrent sync_graph on one namespace", chunks_added=[r.chunks_added for r in reports],
           objects_lost=diff["chunks_missing"] + diff["entities_missing"] + diff["mentions_missing"]
           + diff["relations_missing"], duplicates=sum(duplicates.values()), diff=diff)
    assert not any(diff.values()), diff


# --- stores that are not there -------------------------------------------------------------------------------


def test_unreachable_stores_fail_fast_with_a_clear_error(report):
    """Nobody listens on the ports: StoreError naming the address, in bounded time. Neither connect retries by
    itself: retries with backoff are the Dagster assets' RetryPolicy (3 retries, 5 s exponential, jitter)."""
    base = Settings.from_env()
    http, grpc, bolt = free_port(), free_port(), free_port()
    figures = {}
    for name, connect, address in [
        ("weaviate", lambda: WeaviateStore.connect(dataclasses.replace(
            base, weaviate_url="", weaviate_http_port=http, weaviate_grpc_port=grpc)), f"127.0.0.1:{http}"),
        ("neo4j", lambda: Neo4jStore.connect(dataclasses.replace(
            base, neo4j_uri=f"bolt://127.0.0.1:{bolt}", neo4j_password="x" * 12)), f"127.0.0.1:{bolt}"),
    ]:
        started = time.perf_counter()
        with pytest.raises(StoreError) as failure:
            connect()
        seconds = time.perf_counter() - started
        message = str(failure.value)
        figures[name] = {"seconds": round(seconds, 2), "message": message.splitlines()[0][:200]}
        assert address in message, message
        assert "unreachable" in message
        assert seconds < 30, f"{name}: {seconds:.1f}s to give up"
    report(faults_injected=2, survived=True, **figures)
