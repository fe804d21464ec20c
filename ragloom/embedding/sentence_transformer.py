"""The PyTorch sentence-transformers embedder (the reference backend)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragloom.embedding.base import Embedder, resolve_model_path
from ragloom.errors import EmbeddingError

# Padded tokens per model call on the CPU, as the ONNX embedder caps them (ragloom.embedding.onnx): long texts get
# smaller batches, so activations (batch x width x 1,536 floats per layer, and the attention scores) stay bounded.
MAX_BATCH_TOKENS = 8192


def folder_shape(path: str) -> tuple[int, int] | None:
    """(dimension, max tokens) of a plain sentence-transformers folder (a Transformer, mean or CLS pooling, an
    optional Normalize), read from its JSON files without importing torch; None for any other layout."""
    from ragloom.embedding.onnx import ModelLayout  # deferred: the ONNX backend's reader of the same folders

    try:
        layout = ModelLayout(Path(path))
    except EmbeddingError:
        return None
    if layout.module_kinds not in (["Pooling", "Transformer"], ["Normalize", "Pooling", "Transformer"]):
        return None
    return layout.dimension, layout.max_tokens


class SentenceTransformerEmbedder(Embedder):
    """Loads its model at the first ``encode`` when the folder says its dimension and token limit (``lazy``): a
    sync with nothing new to embed never imports torch (~5 s and ~1 GB in each ingest process)."""

    def __init__(self, model: str = "", device: str = "cpu", batch_size: int = 64, dtype: str = "fp32",
                 max_batch_tokens: int | None = MAX_BATCH_TOKENS, lazy: bool = True) -> None:
        path = resolve_model_path(model)
        self._path, self._device, self._dtype = path, device, dtype
        self._loaded: Any = None
        self._lock = threading.Lock()
        self.batch_size = batch_size
        # On a GPU whole batches are what is fast, and its memory is the model's to use.
        self.max_batch_tokens = max_batch_tokens if device == "cpu" else None
        self._expected = folder_shape(path) if lazy else None  # what the folder says; the loaded model must agree
        self.dimension, self.max_tokens = self._expected or self._shape(self._model)
        precision = "" if dtype == "fp32" else f"|{dtype}"
        self.model_id = f"{model or 'all-MiniLM-L6-v2'}|torch|{self.dimension}{precision}"
        self.model_path = path
        self.backend = "torch"
        self._renormalize = dtype != "fp32"  # normalized in half precision: norms off by up to ~1e-2

    @staticmethod
    def _shape(loaded: Any) -> tuple[int, int]:
        return int(loaded.get_embedding_dimension()), int(loaded.max_seq_length)

    @property
    def _model(self) -> Any:
        """The loaded SentenceTransformer (loaded on first use)."""
        with self._lock:
            if self._loaded is None:
                self._loaded = self._load()
            return self._loaded

    def _load(self) -> Any:
        from sentence_transformers import SentenceTransformer

        try:
            loaded = SentenceTransformer(self._path, device=self._device)
        except Exception as e:  # the library raises many kinds; all mean "cannot load"
            raise EmbeddingError(f"could not load embedding model {self._path!r}: {e}") from e
        import torch  # deferred: loaded by sentence-transformers above already

        # Always the dtype asked for: transformers 5 loads a checkpoint in its stored dtype, so an fp16 checkpoint
        # would run in fp16 (slowly, on a CPU) under a model id that says fp32. Half precision is for a GPU (or
        # bf16 on a CPU with AMX); vectors come back as float32 either way.
        loaded.to({"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[self._dtype])
        shape = self._shape(loaded)
        if self._expected is not None and shape != self._expected:
            raise EmbeddingError(f"{self._path}: the loaded model has dimension and token limit {shape}, its folder "
                                 f"said {self._expected}")
        return loaded

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        texts = list(texts)
        if self.max_batch_tokens is None:
            return self._encode(texts, self.batch_size)
        try:
            ids = self._model.tokenizer(texts, truncation=True, max_length=self.max_tokens)["input_ids"]
        except (TypeError, ValueError) as e:  # non-str input
            raise EmbeddingError(f"could not tokenize a batch of {len(texts)}: {e}") from e
        lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        order = np.argsort(-lengths, kind="stable")  # longest first, like the ONNX embedder
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        begin = 0
        while begin < len(order):
            size = max(1, min(self.batch_size, self.max_batch_tokens // max(int(lengths[order[begin]]), 1)))
            rows = order[begin:begin + size]
            out[rows] = self._encode([texts[i] for i in rows], size)
            begin += size
        return out

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        try:  # sentence-transformers sorts by length and restores the order itself
            vectors = self._model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                         convert_to_numpy=True)
        except (TypeError, ValueError, RuntimeError) as e:  # non-str input, or torch failing on the batch
            raise EmbeddingError(f"could not embed a batch of {len(texts)}: {e}") from e
        vectors = np.asarray(vectors, dtype=np.float32)
        if self._renormalize:
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors
