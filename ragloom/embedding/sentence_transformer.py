"""The PyTorch sentence-transformers embedder (the reference backend)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragloom.embedding.base import Embedder, resolve_model_path
from ragloom.errors import EmbeddingError


class SentenceTransformerEmbedder(Embedder):
    def __init__(self, model: str = "", device: str = "cpu", batch_size: int = 64, dtype: str = "fp32") -> None:
        from sentence_transformers import SentenceTransformer

        path = resolve_model_path(model)
        try:
            self._model = SentenceTransformer(path, device=device)
        except Exception as e:  # the library raises many kinds; all mean "cannot load"
            raise EmbeddingError(f"could not load embedding model {path!r}: {e}") from e
        if dtype != "fp32":  # half precision on a GPU; vectors come back as float32 all the same
            import torch  # deferred: loaded by sentence-transformers above already

            self._model.to({"fp16": torch.float16, "bf16": torch.bfloat16}[dtype])
        self.batch_size = batch_size
        self.dimension = int(self._model.get_embedding_dimension())
        self.max_tokens = int(self._model.max_seq_length)
        precision = "" if dtype == "fp32" else f"|{dtype}"
        self.model_id = f"{model or 'all-MiniLM-L6-v2'}|torch|{self.dimension}{precision}"
        self.model_path = path
        self.backend = "torch"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        try:  # sentence-transformers sorts by length and restores the order itself
            vectors = self._model.encode(
                list(texts), batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True
            )
        except (TypeError, ValueError, RuntimeError) as e:  # non-str input, or torch failing on the batch
            raise EmbeddingError(f"could not embed a batch of {len(texts)}: {e}") from e
        return np.asarray(vectors, dtype=np.float32)
