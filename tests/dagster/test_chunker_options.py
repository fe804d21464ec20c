"""RAGLOOM_CHUNKER_OPTIONS reaches the `chunks_<chunking>` assets: the asset, invoked directly on the sample corpus
(no run, no stores), chunks with the options the setting gives and with the chunker's defaults without it."""

from __future__ import annotations

import pandas as pd
from dagster import build_asset_context

from assets.chunks import build_chunk_assets
from ragloom.parsing import parse_sources
from ragloom.settings import SAMPLE_CORPUS
from ragloom.tables import documents_to_frame
from resources import ArtifactStore, EmbedderResource


def _chunk_frame(tmp_path, name: str) -> pd.DataFrame:
    chunks_asset, _check = build_chunk_assets("recursive")
    documents = documents_to_frame(parse_sources([SAMPLE_CORPUS], SAMPLE_CORPUS).documents)
    # a fresh resource per call: it resolves the environment's settings once
    context = build_asset_context(resources={"artifacts": ArtifactStore(base_dir=str(tmp_path / name)),
                                             "embedder": EmbedderResource()})
    return chunks_asset(context, documents=documents).value


def test_chunker_options_reach_the_chunk_assets(tmp_path, monkeypatch):
    monkeypatch.delenv("RAGLOOM_CHUNKER_OPTIONS", raising=False)
    default = _chunk_frame(tmp_path, "default")
    monkeypatch.setenv("RAGLOOM_CHUNKER_OPTIONS", '{"recursive": {"chunk_size": 64, "overlap": 0}}')
    small = _chunk_frame(tmp_path, "small")
    assert default["token_count"].max() > 64  # the sample corpus has chunks the option must shrink
    assert small["token_count"].max() <= 64
    assert len(small) > len(default)
    # the chunks are the ones the option asks for: no overlap, so one document's chunks never share text
    for _, doc in small.groupby("document_id"):
        spans = sorted(zip(doc["start"], doc["end"], strict=True))
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False))
