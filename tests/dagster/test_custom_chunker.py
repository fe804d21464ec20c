"""A chunker a user registers with `register_chunker` is a first-class chunking: named in RAGLOOM_CHUNKINGS it
gets its own `chunks_<name>` asset, which materializes (with its quality check) like the built-in ones."""

from __future__ import annotations

import dataclasses

from dagster import AssetSelection, materialize

from pipelines.definitions import ingestion_assets
from ragloom.chunking.recursive import RecursiveChunker
from ragloom.settings import SAMPLE_CORPUS, Settings
from resources import ArtifactStore, CorpusResource, EmbedderResource, ParquetIOManager

NAME = "test_dagster_custom"


class SmallChunker(RecursiveChunker):
    def __init__(self, **params):
        super().__init__(chunk_size=params.pop("chunk_size", 64), overlap=0, **params)


def test_a_registered_chunker_materializes(tmp_path, register_chunker_for_test):
    register_chunker_for_test(NAME, SmallChunker)
    settings = dataclasses.replace(Settings.from_env(), chunkings=(NAME,), graph_chunkings=())
    settings.validate()  # the registry, not a built-in list, says which names exist
    assets, checks = ingestion_assets(settings)
    artifacts = ArtifactStore(base_dir=str(tmp_path))
    stores_free = [a for a in assets if not a.key.to_user_string().startswith("vectors_")]
    quality = [c for c in checks if any(k.name == f"chunks_{NAME}_quality" for k in c.check_keys)]
    result = materialize(
        [*stores_free, *quality],
        selection=AssetSelection.keys("documents", f"chunks_{NAME}") | AssetSelection.checks(*quality),
        resources={"corpus": CorpusResource(docs_dir=str(SAMPLE_CORPUS), uploads_dir=str(tmp_path / "uploads")),
                   "artifacts": artifacts, "io_manager": ParquetIOManager(base_dir=artifacts.base_dir),
                   "embedder": EmbedderResource()},
    )
    assert result.success
    [evaluation] = result.get_asset_check_evaluations()
    assert evaluation.check_name == f"chunks_{NAME}_quality" and evaluation.passed
    chunks = artifacts.read(f"chunks_{NAME}")
    assert len(chunks) > 0 and set(chunks["strategy"]) == {NAME}
    assert chunks["token_count"].max() <= 64
    assert not any(name.startswith("graph_") for name in (a.key.to_user_string() for a in assets))
