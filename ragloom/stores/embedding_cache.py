"""The embedding cache: vectors keyed by (model id, sha256 of the embedded text), in Parquet segment files.

Layout: ``<root>/<sha256(model_id)[:16]>/seg-<time>-<random>.parquet``, columns ``key`` (32-byte
sha256 digest) and ``vector`` (fixed-size list of float32), the model id in the file's metadata. Segments
are append-only: ``put_many`` writes a new one under a temporary name, fsyncs it and renames it into
place, so a process killed mid-write leaves at most an ignored ``.tmp`` file, never a torn segment.
A model's segments are read lazily into memory on its first lookup; ``compact`` merges them into one.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ragloom.errors import StoreError

SEGMENT_GLOB = "seg-*.parquet"
STALE_TEMP_SECONDS = 3600
AUTO_COMPACT_SEGMENTS = 64  # merge on load past this many files, so startup stays one read per model


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


class _ModelVectors:
    """One model's cached vectors in memory: key -> row in one of a few stacked arrays."""

    def __init__(self, dimension: int | None = None) -> None:
        self.dimension = dimension
        self.rows: dict[bytes, tuple[int, int]] = {}
        self.blocks: list[np.ndarray] = []

    def add(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        self.blocks.append(vectors)
        block = len(self.blocks) - 1
        for row, key in enumerate(keys):
            self.rows[key] = (block, row)

    def get(self, key: bytes) -> np.ndarray | None:
        where = self.rows.get(key)
        return None if where is None else self.blocks[where[0]][where[1]]


class EmbeddingCache:
    """Vectors of texts already embedded, per model id; safe to share a directory between processes."""

    def __init__(self, root: Path | str, log: Callable[[str], None] | None = None) -> None:
        self.root = Path(root)
        self._log = log or (lambda _msg: None)
        self._models: dict[str, _ModelVectors] = {}
        self._lock = threading.Lock()

    def _dir(self, model_id: str) -> Path:
        return self.root / hashlib.sha256(model_id.encode("utf-8")).hexdigest()[:16]

    def _loaded(self, model_id: str) -> _ModelVectors:
        with self._lock:
            cached = self._models.get(model_id)
            if cached is None:
                cached = self._models[model_id] = self._load(model_id)
            return cached

    def _load(self, model_id: str) -> _ModelVectors:
        model = _ModelVectors()
        folder = self._dir(model_id)
        segments = sorted(folder.glob(SEGMENT_GLOB)) if folder.is_dir() else []
        if folder.is_dir():
            self._remove_stale_temps(folder)
        for path in segments:
            try:
                table = pq.read_table(path)
                stored_id = (table.schema.metadata or {}).get(b"model_id", b"").decode()
                if stored_id != model_id:  # a hash-prefix collision, or a foreign file
                    self._log(f"embedding cache: {path.name} belongs to {stored_id!r}, not {model_id!r}; skipped")
                    continue
                keys = table.column("key").to_pylist()
                vectors = _vectors_from_arrow(table.column("vector"))
            except (OSError, ValueError, KeyError, pa.ArrowException) as e:
                # Renames are atomic, so this is outside damage (disk, hand edits): a cache may forget.
                self._log(f"embedding cache: unreadable segment {path} ({e}); ignored")
                continue
            if model.dimension is None:
                model.dimension = vectors.shape[1]
            if vectors.shape[1] != model.dimension:
                self._log(f"embedding cache: {path.name} has dimension {vectors.shape[1]}, "
                          f"expected {model.dimension}; ignored")
                continue
            model.add(keys, vectors)
        if len(segments) > AUTO_COMPACT_SEGMENTS:
            self._write_compacted(model_id, model, segments)
        return model

    def get_many(self, model_id: str, texts: Sequence[str]) -> tuple[dict[int, np.ndarray], list[int]]:
        """``(hits, misses)``: hits maps an index of ``texts`` to its cached vector; misses are the other indexes."""
        model = self._loaded(model_id)
        hits: dict[int, np.ndarray] = {}
        misses: list[int] = []
        for i, text in enumerate(texts):
            vector = model.get(text_key(text))
            if vector is None:
                misses.append(i)
            else:
                hits[i] = vector
        return hits, misses

    def put_many(self, model_id: str, texts: Sequence[str], vectors: np.ndarray) -> int:
        """Store vectors for texts not cached yet (one new segment); returns how many were new."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise StoreError(f"embedding cache: {len(texts)} texts but vectors of shape {vectors.shape}")
        model = self._loaded(model_id)
        if model.dimension is not None and vectors.shape[1] != model.dimension:
            raise StoreError(f"embedding cache: model {model_id!r} has dimension {model.dimension}, "
                             f"got vectors of dimension {vectors.shape[1]}")
        keys: list[bytes] = []
        rows: list[int] = []
        seen: set[bytes] = set()
        for i, text in enumerate(texts):
            key = text_key(text)
            if key not in seen and model.get(key) is None:
                seen.add(key)
                keys.append(key)
                rows.append(i)
        if not keys:
            return 0
        fresh = np.ascontiguousarray(vectors[rows])
        self._write_segment(model_id, keys, fresh)
        with self._lock:
            model.dimension = model.dimension or fresh.shape[1]
            model.add(keys, fresh)
        return len(keys)

    def size(self, model_id: str) -> int:
        return len(self._loaded(model_id).rows)

    def compact(self, model_id: str) -> int:
        """Merge a model's segments into one file; returns the number of segments replaced."""
        model = self._loaded(model_id)
        segments = sorted(self._dir(model_id).glob(SEGMENT_GLOB))
        if len(segments) <= 1:
            return 0
        self._write_compacted(model_id, model, segments)
        return len(segments)

    # files --------------------------------------------------------------------------------------------
    @staticmethod
    def _remove_stale_temps(folder: Path) -> None:
        """Temp files of writers that died; young ones may belong to a live writer in another process."""
        cutoff = time.time() - STALE_TEMP_SECONDS
        for path in folder.glob(".seg-*.tmp"):
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
            except OSError:
                pass

    def _write_compacted(self, model_id: str, model: _ModelVectors, old: list[Path]) -> None:
        if not model.rows:
            return
        keys = list(model.rows)
        vectors = np.stack([model.get(k) for k in keys])  # type: ignore[misc]
        self._write_segment(model_id, keys, vectors)
        # A crash before these unlinks only leaves duplicates of the same keys: harmless on the next load.
        for path in old:
            path.unlink(missing_ok=True)
        model.blocks, model.rows = [], {}
        model.add(keys, vectors)

    def _write_segment(self, model_id: str, keys: list[bytes], vectors: np.ndarray) -> Path:
        folder = self._dir(model_id)
        folder.mkdir(parents=True, exist_ok=True)
        dim = vectors.shape[1]
        table = pa.table(
            {"key": pa.array(keys, type=pa.binary(32)),
             "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), type=pa.float32()), dim)},
        ).replace_schema_metadata({"model_id": model_id})
        name = f"seg-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
        staged = folder / f".{name}.tmp"
        final = folder / name
        try:
            with staged.open("wb") as f:
                pq.write_table(table, f, compression="zstd")
                f.flush()
                os.fsync(f.fileno())
            os.replace(staged, final)
        except OSError as e:
            staged.unlink(missing_ok=True)
            raise StoreError(f"embedding cache: could not write {final}: {e}") from e
        return final


def _vectors_from_arrow(column: pa.ChunkedArray) -> np.ndarray:
    array = column.combine_chunks()
    dim = array.type.list_size
    return array.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(-1, dim)
