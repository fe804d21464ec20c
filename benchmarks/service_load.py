"""Load on the query service: N concurrent HTTP clients against a real `ragloom serve` on loopback, next to the
in-process Python API run sequentially in the same script (the baseline), for hybrid and graph_rag.

    python benchmarks/service_load.py [--seconds 20] [--concurrency 1,4,16] [--strategies hybrid,graph_rag]
                                      [--corpus-limit 500] [--queries 0]

The corpus is SciFact (``--corpus-limit`` abstracts, the claims as queries), chunked and synced into its own
collections (prefix ``BenchService``, or ``--prefix``) and graph namespace through the pipeline's sync functions (a
re-run finds them in place); ``--drop`` deletes them afterwards. The server gets its own keys file and a rate limit
out of the way. Every run is time-bounded; queries cycle, and no query embedding is kept
(RAGLOOM_QUERY_VECTOR_CACHE=0), so a query that comes round again is embedded again. Prints throughput, p50/p95/p99
and errors per run, and the issues' targets: hybrid throughput at concurrency 16 >= 1.3x the sequential in-process
baseline, p95 <= 100 ms at concurrency 4; graph_rag at concurrency 16 >= 1.5x its sequential rate with p95 <= 250 ms
(#36 item 3); zero errors.

A service run starts once every server process is up, and prints each process's share of the server's CPU and
the spread of its connections' mean latencies: each keep-alive connection stays with the process that accepted it
(the kernel hashes connections to processes), so with few connections one process may hold more of them, and
each of those waits longer.

Beside each run: the CPU it cost, in ms per query, by process (read from /proc before and after the run): the
server (its processes together), Weaviate and Neo4j (the processes listening on the settings' ports), this
script (the load generator; in the in-process runs, the API itself), and the rest of the machine (other work).
Two cores give 2,000 CPU ms a second: 2,000 / (total CPU ms per query) is the throughput ceiling of the machine.
"what the cores allow" puts the two together: how many cores the sequential run already kept busy, and the rate a
service run's CPU per query allows, as a multiple of the sequential rate.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data" / "scifact"
PREFIX, GRAPH_NAMESPACE = "BenchService", "bench_service"
THROUGHPUT_RATIO_TARGET, P95_TARGET_MS, P95_AT = 1.3, 100.0, 4
GRAPH_RATIO_TARGET, GRAPH_P95_TARGET_MS = 1.5, 250.0  # issue #36 item 3: graph_rag through the service at 16 clients
OURS = ("server", "weaviate", "neo4j", "this script")  # the processes a query costs (the rest is other work)


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _ticks(pid: int) -> int:
    """utime + stime of a process (its threads together), in clock ticks; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5), counted after the name


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (uvicorn's worker processes)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        out.append(todo.pop())
        todo.extend(children.get(out[-1], []))
    return out


def _cpus_allowed(pid: int) -> str:
    """The CPUs a process's threads may run on, as /proc lists them ("0-1"; "0 | 1" when its threads differ)."""
    lists = set()
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            lines = status.read_text().splitlines()
        except OSError:
            continue
        lists |= {line.split(":", 1)[1].strip() for line in lines if line.startswith("Cpus_allowed_list:")}
    return " | ".join(sorted(lists)) or "?"


def _listener(port: int) -> int | None:
    """The process listening on a local TCP port (the stores), from /proc/net/tcp and the processes' sockets."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(f"socket:[{parts[9]}]")
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) in inodes for fd in fd_dir.iterdir()):
                return int(fd_dir.parent.name)
        except OSError:
            continue
    return None


def _machine_busy_ticks() -> int:
    """Ticks all cores spent on anything but idle and I/O wait, since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4]


class CpuMeter:
    """CPU ms per query of the server, the stores, this script and the rest of the machine over one run."""

    def __init__(self, settings, server: int | None = None) -> None:
        self.groups: dict[str, list[int]] = {}
        if server is not None:
            self.groups["server"] = _tree(server)
        self.groups["this script"] = [os.getpid()]
        for name, port in (("weaviate", settings.weaviate_http_port), ("neo4j", settings.neo4j_bolt_port)):
            pid = _listener(port)
            if pid is not None:
                self.groups[name] = [pid]

    def __enter__(self) -> CpuMeter:
        self.start = {p: _ticks(p) for pids in self.groups.values() for p in pids}
        self.start_machine = _machine_busy_ticks()
        return self

    def __exit__(self, *exc: object) -> None:
        each = {p: _ticks(p) - self.start[p] for p in self.start}  # per process, read once at each end
        self.used = {name: sum(each[p] for p in pids) for name, pids in self.groups.items()}
        self.used_machine = _machine_busy_ticks() - self.start_machine
        self.server_split = [each[p] for p in self.groups.get("server", [])]

    def shares(self) -> str:
        """How the server's CPU was shared among its processes (uvicorn's parent idles; a keep-alive connection
        stays with the worker that accepted it, so its workers may get unequal shares of the clients)."""
        busy = sorted((t for t in self.server_split if t > 0), reverse=True)
        total = sum(busy) or 1
        return " / ".join(f"{100 * t / total:.0f}%" for t in busy)

    def per_query_ms(self, queries: int) -> dict[str, float]:
        ms = 1000.0 / CLOCK_TICKS / max(queries, 1)
        out = {name: ticks * ms for name, ticks in self.used.items()}
        out["other"] = max(0.0, self.used_machine * ms - sum(out.values()))
        out["total"] = self.used_machine * ms
        return out


CPU_COLUMNS = ("server", "weaviate", "neo4j", "this script", "other", "total")


@dataclasses.dataclass
class Run:
    name: str
    concurrency: int
    latencies_ms: list[float]
    errors: int
    seconds: float
    cpu_ms: dict[str, float] = dataclasses.field(default_factory=dict)
    server_shares: str = ""  # a service run: each server process's share of the server's CPU
    round: int | None = None  # with --rounds above 1: the round whose sequential run is this run's baseline
    connection_means_ms: list[float] = dataclasses.field(default_factory=list)  # a service run: per connection

    def spread(self) -> str:
        """The connections' mean latencies, lowest / median / highest: a keep-alive connection stays with the
        server process that accepted it, so a process that got more of them answers each of them more slowly."""
        means = sorted(self.connection_means_ms)
        if not means:
            return ""
        return f"{means[0]:.0f} / {means[len(means) // 2]:.0f} / {means[-1]:.0f} ms over {len(means)} connections"

    def tag(self) -> str:
        return f" (round {self.round})" if self.round else ""

    def cpu_row(self) -> str:
        cells = "".join(f"{self.cpu_ms[c]:>12.1f}" if c in self.cpu_ms else f"{'-':>12}" for c in CPU_COLUMNS)
        return f"{self.name + self.tag():<45}{self.concurrency:>5}{cells}"

    @property
    def throughput(self) -> float:
        return len(self.latencies_ms) / self.seconds if self.seconds else 0.0

    def our_cpu_ms(self) -> float:
        """CPU ms per query of the processes that serve it (server, stores, the API or the load generator)."""
        return sum(self.cpu_ms.get(c, 0.0) for c in OURS)

    def row(self, baseline: float | None) -> str:
        ratio = f"{self.throughput / baseline:>7.2f}x" if baseline else f"{'':>8}"
        p50, p95, p99 = (pct(self.latencies_ms, q) for q in (50, 95, 99))
        return (f"{self.name + self.tag():<45}{self.concurrency:>5}{len(self.latencies_ms):>8}"
                f"{self.throughput:>9.1f}{ratio}{p50:>9.1f}{p95:>9.1f}{p99:>9.1f}{self.errors:>8}")


def sequential(rag, strategy: str, queries: list[str], k: int, seconds: float) -> Run:
    latencies, errors, i = [], 0, 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        t0 = time.perf_counter()
        try:
            rag.query(queries[i % len(queries)], strategy=strategy, k=k, scope="bench")
            latencies.append((time.perf_counter() - t0) * 1000)
        except Exception:  # counted, not hidden: the run reports its errors
            errors += 1
        i += 1
    return Run(f"in-process sequential {strategy}", 1, latencies, errors, time.perf_counter() - started)


def threaded(rag, strategy: str, queries: list[str], k: int, concurrency: int, seconds: float) -> Run:
    """The in-process API from ``concurrency`` threads: what concurrency gives without the HTTP layer."""
    from concurrent.futures import ThreadPoolExecutor

    latencies: list[float] = []
    errors = 0
    counter = iter(range(10**9))
    deadline = time.perf_counter() + seconds

    def worker() -> None:
        nonlocal errors
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            try:
                rag.query(queries[next(counter) % len(queries)], strategy=strategy, k=k, scope="bench")
                latencies.append((time.perf_counter() - t0) * 1000)
            except Exception:  # counted, not hidden
                errors += 1

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        for future in [pool.submit(worker) for _ in range(concurrency)]:
            future.result()
    return Run(f"in-process threads {strategy}", concurrency, latencies, errors, time.perf_counter() - started)


async def concurrent(url: str, key: str, strategy: str, queries: list[str], k: int, concurrency: int,
                     seconds: float) -> Run:
    import httpx

    latencies: list[float] = []
    by_connection: dict[object, list[float]] = {}
    errors = 0
    counter = iter(range(10**9))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60,
                                 limits=limits) as client:
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal errors
            while time.perf_counter() < deadline:
                query = queries[next(counter) % len(queries)]
                t0 = time.perf_counter()
                try:
                    r = await client.post("/v1/query", json={"query": query, "strategy": strategy, "k": k})
                    if r.status_code == 200:
                        latencies.append((time.perf_counter() - t0) * 1000)
                        stream = r.extensions.get("network_stream")
                        local = stream.get_extra_info("client_addr") if stream is not None else None
                        by_connection.setdefault(local, []).append(latencies[-1])
                    else:
                        errors += 1
                except httpx.HTTPError:
                    errors += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    means = [float(np.mean(v)) for k, v in by_connection.items() if k is not None]
    return Run(f"service {strategy}", concurrency, latencies, errors, elapsed, connection_means_ms=means)


async def raw_concurrent(url: str, key: str, strategy: str, queries: list[str], k: int, concurrency: int,
                         seconds: float) -> Run:
    """``concurrent`` with a client that costs the machine little: each worker keeps one HTTP/1.1 connection open
    and writes requests encoded before the run, reads the status line, the headers up to Content-Length and that
    many bytes of body, and checks the body is a JSON object. It takes 0.13-0.18 CPU ms a query, where httpx took
    1.3-2.0 on the cores the server runs on (docs/experiments/2026-11-28-service-load-generator.md): CPU a remote
    client would not take."""
    from urllib.parse import urlsplit

    host, port = urlsplit(url).hostname, urlsplit(url).port
    requests = []
    for query in queries:
        body = json.dumps({"query": query, "strategy": strategy, "k": k}).encode()
        requests.append(f"POST /v1/query HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {key}\r\n"
                        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    latencies: list[float] = []
    by_connection: dict[object, list[float]] = {}
    errors = 0
    counter = iter(range(10**9))
    deadline = time.perf_counter() + seconds

    async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bool:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        length = next((int(value) for name, _, value in (line.partition(b":") for line in head.split(b"\r\n")[1:])
                       if name.strip().lower() == b"content-length"), None)
        if length is None:
            raise ConnectionError("a response without Content-Length")
        body = await reader.readexactly(length)
        return head[9:12] == b"200" and body[:1] == b"{"

    async def worker() -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection(host, port)
        local = writer.get_extra_info("sockname")
        try:
            while time.perf_counter() < deadline:
                request = requests[next(counter) % len(requests)]
                t0 = time.perf_counter()
                try:
                    ok = await exchange(reader, writer, request)
                except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
                    errors += 1
                    print(f"  {e!r}: reconnecting", file=sys.stderr, flush=True)
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, port)
                    local = writer.get_extra_info("sockname")
                    continue
                if ok:
                    latencies.append((time.perf_counter() - t0) * 1000)
                    by_connection.setdefault(local, []).append(latencies[-1])
                else:
                    errors += 1
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    means = [float(np.mean(v)) for v in by_connection.values()]
    return Run(f"service {strategy}", concurrency, latencies, errors, elapsed, connection_means_ms=means)


class HeldResult:
    """In the app's place for the API (``create_app(rag=...)``): every query answered with one result already held,
    with no retrieval and no worker thread, so a run measures the app's own code alone."""

    profiles = None

    def __init__(self, result: Any) -> None:
        self.result = result

    async def aquery(self, query: Any, /, **fields: Any) -> Any:
        return self.result

    def warm(self, strategy: str) -> None:
        """Nothing to load."""

    async def run_blocking(self, fn: Any, *args: Any, **kwargs: Any) -> None:
        fn(*args, **kwargs)


def app_sequential(settings, key: str, strategy: str, queries: list[str], k: int, seconds: float,
                   held: Any = None) -> Run:
    """The service's FastAPI app called in this process, one request after another, through ASGI with no socket:
    routing, the key check, validation and the JSON response, without uvicorn and the network. Against the API's
    sequential run, what the app costs a query. ``held``: a result every query gets (``HeldResult``), for the
    app's own code alone."""
    from ragloom.service.app import create_app

    app = create_app(settings, rag=None if held is None else HeldResult(held))
    bodies = [json.dumps({"query": q, "strategy": strategy, "k": k}).encode() for q in queries]
    headers = [(b"host", b"bench"), (b"authorization", f"Bearer {key}".encode()),
               (b"content-type", b"application/json")]

    async def call(body: bytes) -> bool:
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": "/v1/query", "raw_path": b"/v1/query", "query_string": b"",
                 "root_path": "", "headers": [*headers, (b"content-length", str(len(body)).encode())],
                 "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        sent: list[dict] = []

        async def receive() -> dict:
            if messages:
                return messages.pop()
            await asyncio.Event().wait()  # the request was read whole: nothing more comes
            return {}

        async def send(message: dict) -> None:
            sent.append(message)

        await app(scope, receive, send)
        return sent[0].get("status") == 200

    async def run() -> Run:
        latencies, errors, i = [], 0, 0
        async with app.router.lifespan_context(app):
            for body in bodies[:20]:  # warm-up
                await call(body)
            started = time.perf_counter()
            while time.perf_counter() - started < seconds:
                t0 = time.perf_counter()
                if await call(bodies[i % len(bodies)]):
                    latencies.append((time.perf_counter() - t0) * 1000)
                else:
                    errors += 1
                i += 1
            name = f"in-process app {strategy}" if held is None else f"in-process app, one held result, {strategy}"
            return Run(name, 1, latencies, errors, time.perf_counter() - started)

    return asyncio.run(run())


def ingest(settings, embedder, documents, graph_too: bool, log) -> int:
    """The corpus's recursive chunks in the benchmark's collection (and graph): the pipeline's own sync functions,
    the shared embedding cache; a re-run writes nothing."""
    from ragloom.chunking import get_chunker
    from ragloom.extraction import extractor_for
    from ragloom.indexing.graph import sync_graph
    from ragloom.indexing.vectors import sync_vectors
    from ragloom.stores.embedding_cache import EmbeddingCache
    from ragloom.stores.neo4j import Neo4jStore
    from ragloom.stores.weaviate import WeaviateStore

    chunks = get_chunker("recursive").chunk_many(documents)
    with WeaviateStore.connect(settings) as vectors:
        sync_vectors(vectors, embedder, "recursive", chunks,
                     cache=EmbeddingCache(settings.artifacts_dir / "embedding_cache"), log=log)
    if graph_too:
        with Neo4jStore.connect(settings) as graph:
            sync_graph(graph, extractor_for(settings), "recursive", chunks, log=log)
    return len(chunks)


def ceiling_lines(runs: list[Run], cores: int) -> list[str]:
    """Per strategy: the cores its in-process sequential run kept busy (its lane runs beside the graph work, and
    the stores work while the API waits), and the most a run at its CPU per query could serve on ``cores``
    (``cores`` x 1,000 / CPU ms per query), as a ratio to the sequential rate. A service run can only beat the
    sequential rate by the cores the sequential run left idle, less what HTTP adds per query."""
    lines = []
    for seq in (r for r in runs if r.name.startswith("in-process sequential") and r.cpu_ms):
        strategy = seq.name.split()[-1]
        busy = seq.our_cpu_ms() * seq.throughput / 1000
        if busy <= 0:
            lines.append(f"{strategy}: no CPU measured")
            continue
        lines.append(f"{strategy}{seq.tag()}: the sequential run kept {busy:.2f} of {cores} cores busy "
                     f"({seq.our_cpu_ms():.1f} CPU ms per query at {seq.throughput:.1f} qps): at its own CPU per "
                     f"query, {cores} cores allow {cores / busy:.2f}x its rate")
        for run in (r for r in runs if r.name == f"service {strategy}" and r.round == seq.round and r.cpu_ms
                    and r.our_cpu_ms() > 0):
            allowed = cores * 1000 / run.our_cpu_ms()
            lines.append(f"  service at {run.concurrency}: {run.our_cpu_ms():.1f} CPU ms per query allow {allowed:.1f} "
                         f"qps = {allowed / seq.throughput:.2f}x the sequential rate; served {run.throughput:.1f}")
    return lines


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(args, settings, namespace: str, key: str, tmp: Path) -> tuple[subprocess.Popen, str]:
    """`ragloom serve` on a free port with the benchmark's keys file and a rate limit out of the way; returns once
    every one of its processes is up. The server runs the ragloom this script imported (`python -m` puts its
    working directory first on the path): an A/B that points PYTHONPATH at another checkout measures that
    checkout's server too."""
    import httpx

    import ragloom
    from ragloom.settings import env_name

    port = _free_port()
    env = {**os.environ, "RAGLOOM_COLLECTION_PREFIX": args.prefix, "RAGLOOM_GRAPH_NAMESPACE": namespace,
           "RAGLOOM_SERVICE_KEYS_FILE": str(tmp / "keys.json"), "RAGLOOM_SERVICE_RATE_PER_MINUTE": "10000000",
           "RAGLOOM_SERVICE_WORKERS": str(args.workers),
           "RAGLOOM_SERVICE_GRAPH_WORKERS": str(args.graph_workers),
           "RAGLOOM_SERVICE_PROCESSES": str(args.processes),
           env_name("query_vector_cache"): str(settings.query_vector_cache)}
    checkout = Path(ragloom.__file__).resolve().parent.parent
    log_file = tmp / "server.log"
    with open(log_file, "w") as server_log:
        server = subprocess.Popen([sys.executable, "-m", "ragloom", "serve", "--port", str(port)], cwd=checkout,
                                  env=env, stdout=server_log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180

    def up() -> bool:
        try:  # every process up before a run opens its connections: one still loading its models has no socket
            ready = httpx.get(f"{url}/readyz", timeout=2).status_code == 200  # yet, and connections opened
        except httpx.HTTPError:                                              # meanwhile would all stay with
            return False                                                     # the others
        return ready and log_file.read_text().count("Application startup complete") >= args.processes

    while not up():
        if server.poll() is not None or time.monotonic() > deadline:
            server.terminate()
            raise SystemExit(f"the server's {args.processes} process(es) did not start:\n"
                             + log_file.read_text()[-3000:])
        time.sleep(0.5)
    return server, url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--corpus-limit", type=int, default=500,
                        help="abstracts: the gold ones of the queries, then a seeded sample of the others")
    parser.add_argument("--queries", type=int, default=0,
                        help="a seeded sample of N claims (0 = all 809; their gold abstracts are always indexed)")
    parser.add_argument("--seconds", type=float, default=20.0, help="per run")
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--strategies", default="hybrid,graph_rag")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--workers", type=int, default=8, help="RAGLOOM_SERVICE_WORKERS of the server")
    parser.add_argument("--graph-workers", type=int, default=3,
                        help="RAGLOOM_SERVICE_GRAPH_WORKERS of the server (graph_rag's and multi_hop's own pool)")
    parser.add_argument("--processes", type=int, default=1, help="RAGLOOM_SERVICE_PROCESSES of the server")
    parser.add_argument("--threads", action="store_true",
                        help="also run the in-process API from N threads (no HTTP), coalesced embedding on")
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat the sequential baseline and the service runs after it, interleaved; the targets "
                             "read the median over rounds of each round's ratio and p95")
    parser.add_argument("--app", action="store_true",
                        help="also call the service's app in this process, sequentially, through ASGI with no socket "
                             "(what the app costs a query beside the API's sequential run), then the same with one "
                             "result held for every query (the app's own code alone)")
    parser.add_argument("--client", choices=("raw", "httpx"), default="raw",
                        help="the load generator: raw (pre-encoded HTTP/1.1 on asyncio streams, little CPU) or httpx")
    parser.add_argument("--prefix", default=PREFIX, help="collection prefix (its lower case names the graph)")
    parser.add_argument("--drop", action="store_true", help="delete the benchmark collections and graph after")
    args = parser.parse_args(argv)

    import httpx

    from ragloom.api import Ragloom
    from ragloom.embedding import make_embedder
    from ragloom.evaluation.datasets import load_dataset
    from ragloom.service.keys import KeyStore
    from ragloom.settings import Settings

    def log(message: str) -> None:
        print(f"  {message}", file=sys.stderr, flush=True)

    load = raw_concurrent if args.client == "raw" else concurrent

    strategies = [s for s in args.strategies.split(",") if s]
    levels = [int(c) for c in args.concurrency.split(",") if c]
    namespace = GRAPH_NAMESPACE if args.prefix == PREFIX else args.prefix.lower()
    # no query embedding kept (RAGLOOM_QUERY_VECTOR_CACHE=0, here and in the server): a run is longer than the 809
    # claims, so queries come round again, and each must pay its embedding as a new query would
    settings = dataclasses.replace(Settings.from_env(), collection_prefix=args.prefix, graph_namespace=namespace,
                                   query_vector_cache=0)
    dataset = load_dataset(args.data, max_queries=args.queries or None, corpus_limit=args.corpus_limit, seed=7)
    queries = [q.text for q in dataset.queries]
    embedder = make_embedder(settings)
    chunk_count = ingest(settings, embedder, dataset.documents, "graph_rag" in strategies, log)

    runs: list[Run] = []
    baselines: dict[tuple[str, int | None], float] = {}  # (strategy, round) -> its sequential qps
    with Ragloom(settings) as rag, tempfile.TemporaryDirectory() as tmp:  # rag: its own query embedder, as the
        for strategy in strategies:                                       # server loads it (one thread)
            rag.warm(strategy)
            sequential(rag, strategy, queries, args.k, min(3.0, args.seconds))  # warm-up
        # --app's second run answers every query with one result of this API's, held
        held = {s: rag.query(queries[0], strategy=s, k=args.k, scope="bench") for s in strategies} if args.app else {}
        del embedder
        key, _ = KeyStore(Path(tmp) / "keys.json").create("bench", label="service_load")
        server, url = start_server(args, settings, namespace, key, Path(tmp))
        # RAGLOOM_SERVICE_PIN_CPUS: each process on a CPU of its own, or on any (its resource tracker is not pinned)
        log("server processes' CPUs (RAGLOOM_SERVICE_PIN_CPUS): "
            + ", ".join(f"{pid} {_cpus_allowed(pid)}" for pid in _tree(server.pid)))
        try:
            for strategy in strategies:
                asyncio.run(load(url, key, strategy, queries, args.k, 4, min(3.0, args.seconds)))  # warm-up
            # each round: the sequential baseline, then the service runs beside it in time, so that the machine's
            # drift (its speed moves by tens of percent over minutes) falls on both sides of each ratio
            rounds = list(range(1, args.rounds + 1)) if args.rounds > 1 else [None]
            for round_ in rounds:
                for strategy in strategies:
                    with CpuMeter(settings) as meter:
                        run = sequential(rag, strategy, queries, args.k, args.seconds)
                    run.cpu_ms, run.round = meter.per_query_ms(len(run.latencies_ms)), round_
                    baselines[strategy, round_] = run.throughput
                    runs.append(run)
                    log(run.row(None))
                    for level in levels:
                        with CpuMeter(settings, server.pid) as meter:
                            run = asyncio.run(load(url, key, strategy, queries, args.k, level, args.seconds))
                        run.cpu_ms, run.round = meter.per_query_ms(len(run.latencies_ms)), round_
                        run.server_shares = meter.shares()
                        runs.append(run)
                        log(run.row(baselines[strategy, round_]) + f"  server processes' CPU shares "
                            f"{run.server_shares}; connections' mean latency {run.spread()}")
            metrics = httpx.get(f"{url}/metrics").text
        finally:
            server.terminate()
            server.wait(timeout=30)
    if args.app:
        with tempfile.TemporaryDirectory() as tmp:
            key, _ = KeyStore(Path(tmp) / "keys.json").create("bench", label="service_load --app")
            app_settings = dataclasses.replace(settings, service_keys_file=Path(tmp) / "keys.json",
                                               service_rate_per_minute=10_000_000)
            for strategy in strategies:
                for answer in (None, held[strategy]):
                    with CpuMeter(settings) as meter:
                        runs.append(app_sequential(app_settings, key, strategy, queries, args.k, args.seconds,
                                                   held=answer))
                    runs[-1].cpu_ms, runs[-1].round = meter.per_query_ms(len(runs[-1].latencies_ms)), rounds[-1]
                    log(runs[-1].row(baselines[strategy, rounds[-1]]))
    if args.threads:
        with Ragloom(settings, coalesce_queries=True) as rag:
            for strategy in strategies:
                rag.warm(strategy)
                for level in levels:
                    with CpuMeter(settings) as meter:
                        runs.append(threaded(rag, strategy, queries, args.k, level, args.seconds))
                    runs[-1].cpu_ms = meter.per_query_ms(len(runs[-1].latencies_ms))
                    runs[-1].round = rounds[-1]
                    log(runs[-1].row(baselines[strategy, rounds[-1]]))

    print(f"\nservice load, SciFact: {len(dataset.documents)} abstracts, {chunk_count} recursive chunks, "
          f"{len(queries)} queries cycling, k={args.k}, {args.seconds:.0f} s per run, {os.cpu_count()} CPUs, "
          f"server workers {args.workers}, graph workers {args.graph_workers}, processes {args.processes}, "
          f"load generator {args.client}")
    print(f"{'run':<45}{'conc':>5}{'queries':>8}{'qps':>9}{'vs seq':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}"
          f"{'errors':>8}")
    for run in runs:
        print(run.row(None if run.name.startswith("in-process sequential")
                      else baselines[run.name.split()[-1], run.round]))
    print(f"\nCPU ms per query (2 cores: 2,000 CPU ms a second; the server row of an in-process run is empty, "
          f"this script is the API itself there), load average now {os.getloadavg()[0]:.2f}")
    print(f"{'run':<45}{'conc':>5}" + "".join(f"{c:>12}" for c in CPU_COLUMNS))
    for run in runs:
        print(run.cpu_row())
    for run in runs:
        print(json.dumps({"run": run.name, "round": run.round, "concurrency": run.concurrency,
                          "queries": len(run.latencies_ms),
                          "qps": round(run.throughput, 2), "p50_ms": round(pct(run.latencies_ms, 50), 2),
                          "p95_ms": round(pct(run.latencies_ms, 95), 2), "p99_ms": round(pct(run.latencies_ms, 99), 2),
                          "errors": run.errors, "cpu_ms_per_query": {k: round(v, 2) for k, v in run.cpu_ms.items()},
                          **({"server_cpu_shares": run.server_shares} if run.server_shares else {}),
                          **({"connection_mean_ms": run.spread()} if run.connection_means_ms else {})}))
    print("\nwhat the cores allow (our processes' CPU per query, other work left out):")
    for line in ceiling_lines(runs, os.cpu_count() or 1):
        print("  " + line)
    batched = [line for line in metrics.splitlines() if line.startswith("ragloom_query_duration_seconds_count")]
    print("server metrics: " + "; ".join(batched))

    print("\ntargets:")
    ok = True
    def service(strategy: str, level: int) -> list[tuple[float, float]]:
        """(ratio to its round's sequential qps, p95 ms) of each round's service run at ``level``."""
        return [(r.throughput / baselines[strategy, r.round], pct(r.latencies_ms, 95)) for r in runs
                if r.name == f"service {strategy}" and r.concurrency == level]

    def median(values: list[float]) -> float:
        return float(np.median(values))

    def each(values: list[float], unit: str) -> str:
        return f" (rounds: {', '.join(f'{v:.2f}{unit}' for v in values)})" if len(values) > 1 else ""

    over = " median over rounds" if args.rounds > 1 else ""
    if service("hybrid", 16):
        ratios = [r for r, _ in service("hybrid", 16)]
        met = median(ratios) >= THROUGHPUT_RATIO_TARGET
        ok &= met
        print(f"  hybrid throughput at 16 / sequential in-process{over}: {median(ratios):.2f}x"
              f"{each(ratios, 'x')} (target >= {THROUGHPUT_RATIO_TARGET}x) {'ok' if met else 'MISS'}")
    if service("hybrid", P95_AT):
        p95s = [p for _, p in service("hybrid", P95_AT)]
        met = median(p95s) <= P95_TARGET_MS
        ok &= met
        print(f"  hybrid p95 at concurrency {P95_AT}{over}: {median(p95s):.1f} ms{each(p95s, ' ms')} "
              f"(target <= {P95_TARGET_MS:.0f}) {'ok' if met else 'MISS'}")
    if service("graph_rag", 16):
        ratios, p95s = [r for r, _ in service("graph_rag", 16)], [p for _, p in service("graph_rag", 16)]
        met = median(ratios) >= GRAPH_RATIO_TARGET and median(p95s) <= GRAPH_P95_TARGET_MS
        ok &= met
        print(f"  graph_rag at 16 / sequential in-process{over}: {median(ratios):.2f}x{each(ratios, 'x')} (target >= "
              f"{GRAPH_RATIO_TARGET}x), p95 {median(p95s):.1f} ms{each(p95s, ' ms')} (target <= "
              f"{GRAPH_P95_TARGET_MS:.0f}) {'ok' if met else 'MISS'}")
    errors = sum(r.errors for r in runs)
    ok &= errors == 0
    print(f"  errors: {errors} (target 0) {'ok' if errors == 0 else 'MISS'}")

    if args.drop:
        from ragloom.stores.neo4j import Neo4jStore
        from ragloom.stores.weaviate import WeaviateStore

        with WeaviateStore.connect(settings) as vectors:
            vectors.drop_collections()
        with Neo4jStore.connect(settings) as graph:
            graph.clear()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
