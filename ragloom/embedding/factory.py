"""Pick and build the embedder the settings ask for: backend (torch | onnx | onnx-int8), model, device, batch."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragloom.embedding.base import Embedder
from ragloom.errors import ConfigError, EmbeddingError
from ragloom.settings import Settings

BACKENDS = ("torch", "onnx", "onnx-int8")
DEVICES = ("cpu", "cuda", "auto")


@dataclass(frozen=True)
class EmbedderParams:
    backend: str = "onnx-int8"  # the default of Settings.embed_backend
    model: str = ""  # name or path; '' = all-MiniLM-L6-v2 from its PyPI package
    device: str = "cpu"  # cpu | cuda | cuda:N | auto (cuda when present, else cpu)
    batch_size: int = 64
    cache_dir: Path | None = None  # where ONNX exports are kept; None = Settings().cache_dir

    @classmethod
    def from_settings(cls, settings: Settings) -> EmbedderParams:
        return cls(backend=settings.embed_backend, model=settings.embed_model, device=settings.embed_device,
                   batch_size=settings.embed_batch_size, cache_dir=settings.cache_dir)

    def validate(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(f"embedding backend {self.backend!r}: choose {', '.join(BACKENDS)}")
        if self.device.split(":")[0] not in DEVICES:
            raise ConfigError(f"embedding device {self.device!r}: choose cpu, cuda, cuda:N or auto")
        if self.batch_size < 1:
            raise ConfigError(f"embedding batch size must be >= 1, got {self.batch_size}")


def resolve_device(device: str, backend: str) -> str:
    """'auto' becomes cuda when the backend can use a GPU here, else cpu; an explicit cuda must exist."""
    if backend == "torch":
        import torch

        has_gpu = torch.cuda.is_available()
    else:
        import onnxruntime as ort

        has_gpu = "CUDAExecutionProvider" in ort.get_available_providers()
    if device == "auto":
        return "cuda" if has_gpu else "cpu"
    if device.startswith("cuda") and not has_gpu:
        raise EmbeddingError(f"embedding device {device!r} asked for, but the {backend} backend sees no CUDA GPU")
    return device


_built: dict[EmbedderParams, Embedder] = {}
_lock = threading.Lock()


def make_embedder(settings_or_params: Settings | EmbedderParams | Mapping[str, Any] | None = None,
                  *, reuse: bool = True) -> Embedder:
    """The embedder for these settings (or params, or a mapping of EmbedderParams fields).

    With ``reuse`` the same params give the same loaded model within a process (loading costs seconds).
    """
    if settings_or_params is None:
        params = EmbedderParams.from_settings(Settings.from_env())
    elif isinstance(settings_or_params, Settings):
        params = EmbedderParams.from_settings(settings_or_params)
    elif isinstance(settings_or_params, EmbedderParams):
        params = settings_or_params
    else:
        unknown = set(settings_or_params) - set(EmbedderParams.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"unknown embedder parameter(s) {sorted(unknown)}; "
                              f"known: {sorted(EmbedderParams.__dataclass_fields__)}")
        params = EmbedderParams(**settings_or_params)
    params.validate()
    if params.cache_dir is None:
        params = EmbedderParams(**{**params.__dict__, "cache_dir": Settings.from_env().cache_dir})
    with _lock:
        if reuse and params in _built:
            return _built[params]
        embedder = _build(params)
        if reuse:
            _built[params] = embedder
        return embedder


def _build(params: EmbedderParams) -> Embedder:
    device = resolve_device(params.device, params.backend)
    if params.backend == "torch":
        # deferred: torch / onnxruntime load only with a model
        from ragloom.embedding.sentence_transformer import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(params.model, device=device, batch_size=params.batch_size)
    from ragloom.embedding.onnx import OnnxEmbedder  # deferred: torch / onnxruntime load only with a model

    return OnnxEmbedder(params.model, quantized=params.backend == "onnx-int8", device=device,
                        batch_size=params.batch_size, cache_dir=params.cache_dir)
