"""Rerankers: a cross-encoder reads (query, passage) pairs after fusion and reorders the candidates.

One small interface (``Reranker.logits``); the sigmoid, the candidate pool, the stable order and the
relevance floor are done once in ``rerank``. Two backends: sentence-transformers' ``CrossEncoder`` (PyTorch)
and the same weights exported to ONNX (fp32, or int8 dynamically quantized) with the embedder's helpers.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragloom.errors import EmbeddingError, RerankError
from ragloom.settings import MODEL_BACKENDS, Settings
from ragloom.types import RetrievedItem

DEFAULT_CANDIDATES = 30
NO_MODEL = ("", "none", "off")
MAX_BATCH_TOKENS = 8192  # padded tokens per ONNX call, as for the embedder


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


class Reranker(ABC):
    """Scores how well each text answers the query; ``model_id`` names model and backend."""

    model_id: str

    @abstractmethod
    def logits(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """One raw relevance logit per text, in the texts' order."""

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Relevance in (0, 1): the sigmoid of the logits (what ``relevance_floor`` is compared with)."""
        if not texts:
            return np.zeros(0, dtype=np.float64)
        return sigmoid(self.logits(query, texts))


def rerank(reranker: Reranker, query: str, items: Sequence[RetrievedItem], candidates: int,
           floor: float = 0.0) -> tuple[list[RetrievedItem], dict[str, Any]]:
    """The first ``candidates`` items re-scored by ``reranker`` and sorted by (−relevance, chunk id).

    Each item's ``score`` becomes its relevance; the strategy's score moves to ``lane_scores["retrieval"]``
    and the relevance is also kept as ``lane_scores["rerank"]``. Items under ``floor`` (0 = off) are dropped;
    items past the pool are dropped too (they were not judged). Returns (items, what was done).
    """
    pool = list(items[:candidates])
    relevance = reranker.score(query, [item.text for item in pool])
    for item, value in zip(pool, relevance, strict=True):
        item.lane_scores["retrieval"] = item.score
        item.lane_scores["rerank"] = float(value)
        item.score = float(value)
    ranked = sorted(pool, key=lambda item: (-item.score, item.chunk_id))
    dropped = [item.chunk_id for item in ranked if item.score < floor] if floor > 0 else []
    if dropped:
        ranked = [item for item in ranked if item.score >= floor]
    return ranked, {"applied": True, "model": reranker.model_id, "candidates": len(pool),
                    "below_floor": dropped}


class CrossEncoderReranker(Reranker):
    """sentence-transformers ``CrossEncoder`` from a local folder or a model name (the hub, or its cache)."""

    def __init__(self, model: str, device: str = "cpu", batch_size: int = 32) -> None:
        from sentence_transformers import CrossEncoder

        local = Path(model).expanduser()
        try:
            if local.is_dir():
                self._model = CrossEncoder(str(local), device=device, local_files_only=True)
            else:
                self._model = CrossEncoder(model, device=device)
        except Exception as e:  # the library raises many kinds (OSError, ValueError, HTTP errors): all "cannot load"
            raise RerankError(f"could not load the reranking model {model!r}: {e}") from e
        if int(self._model.config.num_labels) != 1:
            raise RerankError(f"{model!r} has {self._model.config.num_labels} labels; a reranker has one")
        self.batch_size = batch_size
        self.model_id = f"{model}|torch"

    def logits(self, query: str, texts: Sequence[str]) -> np.ndarray:
        import torch

        try:
            out = self._model.predict([(query, text) for text in texts], batch_size=self.batch_size,
                                      activation_fn=torch.nn.Identity(), show_progress_bar=False)
        except (TypeError, ValueError, RuntimeError) as e:
            raise RerankError(f"the reranker failed on {len(texts)} pairs: {e}") from e
        return np.asarray(out, dtype=np.float64).reshape(len(texts))


def model_dir(model: str) -> Path:
    """A local folder for a model path or name (a name is fetched by huggingface_hub, or read from its cache
    when HF_HUB_OFFLINE is set)."""
    local = Path(model).expanduser()
    if local.is_dir():
        return local
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model))
    except Exception as e:  # not cached and not reachable, or not a repo id: no model either way
        raise RerankError(f"reranking model {model!r} is neither a local folder nor reachable: {e}") from e


class OnnxCrossEncoderReranker(Reranker):
    """The cross-encoder's classifier exported to ONNX (cached by weights fingerprint) and run by ONNX Runtime.

    Pairs are tokenized with the model's ``tokenizer.json`` (longest-first truncation, like the
    transformers tokenizer behind ``CrossEncoder``), sorted by length and padded per batch.
    """

    def __init__(self, model: str, *, quantized: bool = False, cache_dir: Path | str | None = None,
                 threads: int | None = None, batch_size: int = 32) -> None:
        from tokenizers import Tokenizer

        # deferred: torch / onnxruntime load only with a model
        from ragloom.embedding.onnx import ModelLayout, export_model, open_session

        folder = model_dir(model)
        cache = Path(cache_dir) if cache_dir is not None else Settings.from_env().cache_dir
        try:
            layout = ModelLayout(folder)
            self.onnx_path = export_model(layout, cache, quantized, head="classifier")
        except EmbeddingError as e:
            raise RerankError(f"could not prepare the ONNX reranker from {folder}: {e}") from e
        self.backend = "onnx-int8" if quantized else "onnx"
        self.model_id = f"{model}|{self.backend}"
        self.batch_size = batch_size
        self._tokenizer = Tokenizer.from_file(str(layout.tokenizer_path))
        self._tokenizer.enable_truncation(max_length=layout.max_tokens, strategy="longest_first")
        self._tokenizer.no_padding()
        pad = self._tokenizer.token_to_id("[PAD]")
        self._pad_id = 0 if pad is None else pad
        try:
            self._session = open_session(self.onnx_path, threads)
        except EmbeddingError as e:
            raise RerankError(str(e)) from e
        self._inputs = [i.name for i in self._session.get_inputs()]
        labels = self._session.get_outputs()[0].shape[-1]
        if isinstance(labels, int) and labels != 1:
            raise RerankError(f"{model!r} has {labels} labels; a reranker has one")

    def logits(self, query: str, texts: Sequence[str]) -> np.ndarray:
        from ragloom.embedding.onnx import padded_batches  # deferred: torch / onnxruntime load only with a model

        out = np.zeros(len(texts), dtype=np.float64)
        try:
            encodings = self._tokenizer.encode_batch([(query, text) for text in texts])
        except Exception as e:  # tokenizers raises TypeError/bare Exception on non-str input
            raise RerankError(f"could not tokenize {len(texts)} pairs: {e}") from e
        for rows, feed in padded_batches(encodings, self._pad_id, self.batch_size, MAX_BATCH_TOKENS):
            try:
                logits = self._session.run(None, {k: feed[k] for k in self._inputs})[0]
            except Exception as e:  # onnxruntime raises bare exceptions
                raise RerankError(f"ONNX Runtime failed on {len(rows)} pairs: {e}") from e
            out[rows] = np.asarray(logits, dtype=np.float64).reshape(len(rows))
        return out


_built: dict[tuple[str, str, str], Reranker] = {}
_lock = threading.Lock()


def make_reranker(model: str, backend: str = "onnx", cache_dir: Path | str | None = None) -> Reranker | None:
    """The reranker for ``model`` (a name or a local folder) on ``backend``; None when ``model`` is "none"
    or empty. Loaded once per process; raises RerankError when the model cannot be had."""
    if model.strip().lower() in NO_MODEL:
        return None
    if backend not in MODEL_BACKENDS:
        raise RerankError(f"reranker backend {backend!r}: choose {', '.join(MODEL_BACKENDS)}")
    key = (model, backend, str(cache_dir or ""))
    with _lock:
        if key not in _built:
            if backend == "torch":
                _built[key] = CrossEncoderReranker(model)
            else:
                _built[key] = OnnxCrossEncoderReranker(model, quantized=backend == "onnx-int8", cache_dir=cache_dir)
        return _built[key]


def reranker_for(settings: Settings) -> Reranker | None:
    """The reranker the settings ask for (RAGLOOM_RERANK_MODEL, RAGLOOM_RERANK_BACKEND)."""
    return make_reranker(settings.rerank_model, settings.rerank_backend, settings.cache_dir)
