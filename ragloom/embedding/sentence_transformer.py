"""The PyTorch sentence-transformers embedder (the reference backend)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragloom.embedding.base import Embedder, resolve_model_path
from ragloom.errors import EmbeddingError

# Padded tokens per model call on the CPU, as the ONNX embedder caps them (ragloom.embedding.onnx): long texts get
# smaller batches, so activations (batch x width x 1,536 floats per layer, and the attention scores) stay bounded.
MAX_BATCH_TOKENS = 8192


class SentenceTransformerEmbedder(Embedder):
    def __init__(self, model: str = "", device: str = "cpu", batch_size: int = 64, dtype: str = "fp32",
                 max_batch_tokens: int | None = MAX_BATCH_TOKENS) -> None:
        from sentence_transformers import SentenceTransformer

        path = resolve_model_path(model)
        try:
            self._model = SentenceTransformer(path, device=device)
        except Exception as e:  # the library raises many kinds; all mean "cannot load"
            raise EmbeddingError(f"could not load embedding model {path!r}: {e}") from e
        import torch  # deferred: loaded by sentence-transformers above already

        # Always the dtype asked for: transformers 5 loads a checkpoint in its stored dtype, so an fp16 checkpoint
        # would run in fp16 (slowly, on a CPU) under a model id that says fp32. Half precision is for a GPU;
        # vectors come back as float32 either way.
        self._model.to({"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype])
        self.batch_size = batch_size
        # On a GPU whole batches are what is fast, and its memory is the model's to use.
        self.max_batch_tokens = max_batch_tokens if device == "cpu" else None
        self.dimension = int(self._model.get_embedding_dimension())
        self.max_tokens = int(self._model.max_seq_length)
        precision = "" if dtype == "fp32" else f"|{dtype}"
        self.model_id = f"{model or 'all-MiniLM-L6-v2'}|torch|{self.dimension}{precision}"
        self.model_path = path
        self.backend = "torch"
        self._renormalize = dtype != "fp32"  # normalized in half precision: norms off by up to ~1e-2

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
