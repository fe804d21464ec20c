"""The Parquet embedding cache: hits and misses, persistence, model separation and crash safety."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ragloom.errors import StoreError
from ragloom.stores.embedding_cache import STALE_TEMP_SECONDS, EmbeddingCache

MODEL = "all-MiniLM-L6-v2|onnx|4"


def _vectors(n: int, dim: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


def _segments(root: Path) -> list[Path]:
    return sorted(root.rglob("seg-*.parquet"))


def test_hits_and_misses(tmp_path: Path):
    cache = EmbeddingCache(tmp_path)
    vectors = _vectors(3)
    assert cache.put_many(MODEL, ["alpha", "beta", "gamma"], vectors) == 3
    hits, misses = cache.get_many(MODEL, ["beta", "delta", "alpha", "beta"])
    assert misses == [1]
    assert sorted(hits) == [0, 2, 3]
    np.testing.assert_array_equal(hits[0], vectors[1])
    np.testing.assert_array_equal(hits[2], vectors[0])
    np.testing.assert_array_equal(hits[3], vectors[1])


def test_persists_across_instances_bit_exact(tmp_path: Path):
    vectors = _vectors(50, dim=384)
    texts = [f"chunk {i} ünïcode ✓" for i in range(50)]
    EmbeddingCache(tmp_path).put_many(MODEL, texts, vectors)
    hits, misses = EmbeddingCache(tmp_path).get_many(MODEL, texts)
    assert misses == []
    np.testing.assert_array_equal(np.stack([hits[i] for i in range(50)]), vectors)


def test_models_never_share_vectors(tmp_path: Path):
    cache = EmbeddingCache(tmp_path)
    cache.put_many(MODEL, ["same text"], _vectors(1))
    hits, misses = cache.get_many("all-MiniLM-L6-v2|torch|4", ["same text"])
    assert hits == {} and misses == [0]
    hits, misses = EmbeddingCache(tmp_path).get_many("all-MiniLM-L6-v2|torch|4", ["same text"])
    assert hits == {} and misses == [0]


def test_only_new_texts_are_written(tmp_path: Path):
    cache = EmbeddingCache(tmp_path)
    assert cache.put_many(MODEL, ["a", "b"], _vectors(2)) == 2
    assert cache.put_many(MODEL, ["a", "b"], _vectors(2, seed=1)) == 0  # first vector wins; no new segment
    assert cache.put_many(MODEL, ["b", "c", "c"], _vectors(3, seed=2)) == 1
    assert len(_segments(tmp_path)) == 2
    assert cache.size(MODEL) == 3


def test_bad_shapes_are_refused(tmp_path: Path):
    cache = EmbeddingCache(tmp_path)
    with pytest.raises(StoreError, match="texts but vectors"):
        cache.put_many(MODEL, ["a", "b"], _vectors(3))
    cache.put_many(MODEL, ["a"], _vectors(1))
    with pytest.raises(StoreError, match="dimension 4"):
        cache.put_many(MODEL, ["b"], _vectors(1, dim=8))


def test_compaction_keeps_every_vector(tmp_path: Path):
    cache = EmbeddingCache(tmp_path)
    expected = {}
    for round_ in range(4):
        texts = [f"t{round_}-{i}" for i in range(5)]
        vectors = _vectors(5, seed=round_)
        cache.put_many(MODEL, texts, vectors)
        expected.update(zip(texts, vectors, strict=True))
    assert len(_segments(tmp_path)) == 4
    assert cache.compact(MODEL) == 4
    assert len(_segments(tmp_path)) == 1
    texts = list(expected)
    hits, misses = EmbeddingCache(tmp_path).get_many(MODEL, texts)
    assert misses == []
    for i, text in enumerate(texts):
        np.testing.assert_array_equal(hits[i], expected[text])


def test_a_failed_rename_leaves_no_segment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cache = EmbeddingCache(tmp_path)
    cache.put_many(MODEL, ["kept"], _vectors(1))

    def refuse(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(StoreError, match="disk full"):
        cache.put_many(MODEL, ["lost"], _vectors(1, seed=3))
    monkeypatch.undo()
    assert len(_segments(tmp_path)) == 1
    assert not list(tmp_path.rglob("*.tmp"))
    hits, misses = EmbeddingCache(tmp_path).get_many(MODEL, ["kept", "lost"])
    assert list(hits) == [0] and misses == [1]


def test_process_killed_between_write_and_rename(tmp_path: Path):
    """A real process dies (os._exit) with its segment fully written but not renamed: nothing is half-visible."""
    EmbeddingCache(tmp_path).put_many(MODEL, ["before"], _vectors(1))
    script = f"""
import os, numpy as np
from ragloom.stores.embedding_cache import EmbeddingCache
os.replace = lambda src, dst: os._exit(17)
EmbeddingCache({str(tmp_path)!r}).put_many({MODEL!r}, ["during"], np.ones((1, 4), dtype=np.float32))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 17, proc.stderr
    assert len(list(tmp_path.rglob("*.tmp"))) == 1  # the orphan: written, never renamed
    hits, misses = EmbeddingCache(tmp_path).get_many(MODEL, ["before", "during"])
    assert list(hits) == [0] and misses == [1]


def test_stale_temp_files_are_removed_young_ones_kept(tmp_path: Path):
    cache = EmbeddingCache(tmp_path)
    segment = cache._write_segment(MODEL, [b"\0" * 32], _vectors(1))
    old = segment.parent / ".seg-old.parquet.tmp"
    young = segment.parent / ".seg-young.parquet.tmp"
    old.write_bytes(b"partial")
    young.write_bytes(b"partial")
    past = time.time() - STALE_TEMP_SECONDS - 10
    os.utime(old, (past, past))
    EmbeddingCache(tmp_path).get_many(MODEL, ["x"])
    assert not old.exists() and young.exists()


def test_a_damaged_segment_is_skipped_not_fatal(tmp_path: Path):
    logs: list[str] = []
    cache = EmbeddingCache(tmp_path)
    cache.put_many(MODEL, ["good"], _vectors(1))
    damaged = _segments(tmp_path)[0].parent / "seg-99999999999999999999-deadbeef.parquet"
    damaged.write_bytes(b"PAR1 not really parquet")
    hits, misses = EmbeddingCache(tmp_path, log=logs.append).get_many(MODEL, ["good", "other"])
    assert list(hits) == [0] and misses == [1]
    assert any("unreadable segment" in line for line in logs)
