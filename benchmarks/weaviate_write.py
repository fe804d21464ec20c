"""Weaviate's own write rate on this machine: how many objects a second one collection takes, by requests in flight.

A Weaviate of its own (the stack's binary and server settings, free ports, a temporary data folder) takes
SciFact chunks as ragloom stores them (`object_properties`, the default embedder's vectors) in REST batches of
512, encoded before the clock starts, so the figure is the server's and not the client's. Each run writes
into a fresh collection with ragloom's schema, for each number of requests in flight, with the vector index
built synchronously (the stack's setting) and then asynchronously (`ASYNC_INDEXING`, the server restarted),
whose figure counts until the index queue is empty. Prints objects/s written and indexed and the server's CPU.
``--schemas shipped,previous`` also writes, in turn within each repeat, into collections whose properties carry
the indexes they had before 2026-11-26 (``text`` and ``heading_path`` searched by BM25, every property
filterable): the baseline of docs/experiments/2026-11-26-weaviate-lean-schema.md.

    python benchmarks/weaviate_write.py [--chunks 6000] [--flights 1,4,16] [--repeats 2] [--schemas shipped]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
BATCH = 512  # objects per request: ragloom's INSERT_BATCH
# property -> (searchable, filterable) before the schema kept only the indexes a query reads
PREVIOUS_INDEXES = {"text": (True, True), "heading_path": (True, True), "heading_parts": (False, True),
                    "position": (False, True), "start": (False, True), "end": (False, True),
                    "token_count": (False, True)}


@contextmanager
def schema_of(name: str):
    """Collections created inside get the ``shipped`` schema or the ``previous`` one (PREVIOUS_INDEXES)."""
    from ragloom.stores.weaviate import schema

    if name == "shipped":
        yield
        return
    shipped = dict(schema.CORE_PROPERTIES)
    for prop, (searchable, filterable) in PREVIOUS_INDEXES.items():
        data_type, tokenization, _, _ = shipped[prop]
        schema.CORE_PROPERTIES[prop] = (data_type, tokenization, searchable, filterable)
    try:
        yield
    finally:
        schema.CORE_PROPERTIES.update(shipped)


def _free_base() -> int:
    """An HTTP port whose next four (Weaviate's internal ports) and the gRPC port below are free too."""
    for base in range(41000, 60000, 10):
        ports = [base, base + 1, base + 2, base + 3, base + 4, base - 5]
        try:
            for port in ports:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    sys.exit("no free block of ports")


def objects_of(data: Path, limit: int, settings) -> tuple[list[dict], dict]:
    """``limit`` chunks of SciFact as ragloom writes them (properties, uuid, vector), with the settings' embedding
    model, and the collection schema."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_ingest import chunks_of

    from ragloom.embedding import make_embedder
    from ragloom.metadata import MetadataLayout
    from ragloom.stores.weaviate.schema import object_properties

    # every abstract gives a chunk or more: chunk no more than needed
    chunks = chunks_of(data, limit, settings.embed_model)[:limit]
    vectors = make_embedder(settings, reuse=False).encode([c.embed_text for c in chunks])
    layout = MetadataLayout()
    from weaviate.util import generate_uuid5

    objects = [{"id": generate_uuid5(c.chunk_id), "properties": object_properties(c, layout),
                "vectors": {"default": v.tolist()}} for c, v in zip(chunks, vectors, strict=True)]
    return objects, layout


def check_schema(store, strategy: str, name: str) -> None:
    """Stop unless the strategy's collection carries the indexes of schema ``name`` (a baseline that is not
    the previous schema would compare nothing)."""
    from ragloom.stores.weaviate.schema import CORE_PROPERTIES

    config = store.client.collections.get(store.collection_name(strategy)).config.get()
    got = {p.name: (bool(p.index_searchable), bool(p.index_filterable)) for p in config.properties}
    want = PREVIOUS_INDEXES if name == "previous" else {p: CORE_PROPERTIES[p][2:] for p in PREVIOUS_INDEXES}
    wrong = {p: got.get(p) for p, indexes in want.items() if got.get(p) != tuple(indexes)}
    if wrong:
        sys.exit(f"the {name} schema was not the one created: (searchable, filterable) {wrong}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--chunks", type=int, default=6000)
    parser.add_argument("--flights", default="1,4,16", help="requests in flight, one run each")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--schemas", default="shipped", help="shipped and/or previous (the indexes before)")
    args = parser.parse_args()
    schemas = [n for n in args.schemas.split(",") if n]
    if not schemas or set(schemas) - {"shipped", "previous"}:
        parser.error("--schemas: a comma-separated list of shipped and previous")

    from dataclasses import replace

    from ragloom.settings import Settings
    from ragloom.stack import weaviate as weaviate_server
    from ragloom.stack.process import wait_until
    from ragloom.stores.weaviate import WeaviateStore

    settings = Settings.from_env()
    objects, layout = objects_of(args.data, args.chunks, settings)
    base = _free_base()
    folder = Path(tempfile.mkdtemp(prefix="ragloom-weaviate-write-"))
    settings = replace(settings, weaviate_http_port=base, weaviate_grpc_port=base - 5,
                       weaviate_url="", weaviate_api_key="", collection_prefix="BenchWrite", data_dir=folder)
    binary = weaviate_server.provision(settings)
    url = f"http://127.0.0.1:{base}"
    print(f"{len(objects)} objects, batches of {BATCH}; {os.cpu_count()} CPUs; load average "
          f"{os.getloadavg()[0]:.1f}; Weaviate {binary}", flush=True)
    client = httpx.Client(limits=httpx.Limits(max_connections=64), timeout=120)
    try:
        for indexing, extra in (("sync", {}), ("async", {"ASYNC_INDEXING": "true"})):
            data = folder / "weaviate" / "data"
            shutil.rmtree(data, ignore_errors=True)
            data.mkdir(parents=True)
            env = {**weaviate_server.server_env(settings, ""), "RAFT_TIMEOUTS_MULTIPLIER": "1",
                   "PERSISTENCE_DATA_PATH": str(data), **extra}
            log = (folder / "weaviate.log").open("a")
            proc = subprocess.Popen([str(binary), "--host", "127.0.0.1", "--port", str(base), "--scheme", "http"],
                                    env=env, stdout=subprocess.DEVNULL, stderr=log)
            try:
                wait_until(lambda: weaviate_server.ready(settings), 60, "Weaviate", folder / "weaviate.log",
                           alive=lambda p=proc: p.poll() is None)
                store = WeaviateStore.connect(replace(settings, weaviate_url=""))
                store.metadata = layout
                try:
                    for _ in range(args.repeats):
                        for flight in [int(n) for n in args.flights.split(",") if n]:
                            for schema_name in schemas:
                                with schema_of(schema_name):
                                    _run(client, url, store, objects, indexing, schema_name, flight,
                                         psutil.Process(proc.pid))
                finally:
                    store.drop_collections()
                    store.close()
            finally:
                proc.terminate()
                proc.wait(60)
                log.close()
    finally:
        client.close()
        shutil.rmtree(folder, ignore_errors=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


def _queue_length(client: httpx.Client, url: str) -> int:
    nodes = client.get(url + "/v1/nodes?output=verbose").json()["nodes"]
    return sum(int(s.get("vectorQueueLength") or 0) for n in nodes for s in (n.get("shards") or []))


def _run(client, url, store, objects, indexing: str, schema: str, flight: int, server: psutil.Process) -> None:
    strategy = f"w{uuid.uuid4().hex[:8]}"
    store.ensure_collection(strategy, len(objects[0]["vectors"]["default"]), model_id="bench")
    check_schema(store, strategy, schema)
    name = store.collection_name(strategy)
    # bodies encoded before the clock starts: the client's JSON encoding of 384 floats per object is not the server's
    bodies = [json.dumps({"objects": [{**o, "class": name} for o in objects[b:b + BATCH]]}).encode()
              for b in range(0, len(objects), BATCH)]

    def send(body: bytes) -> int:
        response = client.post(url + "/v1/batch/objects", content=body, headers={"Content-Type": "application/json"})
        response.raise_for_status()
        return response.content.count(b'"errors"')

    before, started = server.cpu_times(), time.perf_counter()
    with ThreadPoolExecutor(flight) as pool:
        errors = sum(pool.map(send, bodies))
    written = time.perf_counter() - started
    while _queue_length(client, url) > 0 and time.perf_counter() - started < 600:
        time.sleep(0.05)
    indexed = time.perf_counter() - started
    after = server.cpu_times()
    cpu = (after.user + after.system) - (before.user + before.system)
    count = store.count(strategy)
    label = f"{indexing} {schema}"
    print(f"{label:14s} {flight:2d} in flight: written {len(objects) / written:7.0f} objects/s ({written:5.2f} s), "
          f"indexed {len(objects) / indexed:7.0f} objects/s ({indexed:5.2f} s), server CPU {cpu:5.1f} s "
          f"({cpu / indexed:4.1f} cores, {cpu * 1000 / len(objects):4.2f} ms per object), errors {errors}, "
          f"stored {count}", flush=True)
    store.drop_collection(strategy)


if __name__ == "__main__":
    main()
