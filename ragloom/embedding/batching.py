"""Concurrent encode calls coalesced into one model call: what a busy query service needs.

Threads call ``encode`` as usual. One worker thread takes every request waiting when it becomes free and
runs them as one batch, so under load N concurrent queries cost one model call instead of N, and a lone
query waits for nothing but a thread hand-off (no fixed batching window).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from ragloom.embedding.base import Embedder
from ragloom.errors import EmbeddingError


class CoalescingEmbedder(Embedder):
    """Wraps an embedder; same vectors, fewer model calls under concurrency. ``batches`` and ``requests`` count
    model calls and encode calls (their ratio is the sharing achieved)."""

    def __init__(self, inner: Embedder, max_batch: int = 64) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.max_tokens = inner.max_tokens
        self.max_batch = max(1, max_batch)
        self.batches = 0
        self.requests = 0
        self._pending: list[tuple[list[str], Future[np.ndarray]]] = []
        self._cond = threading.Condition()
        self._closed = False
        self._worker = threading.Thread(target=self._run, name="ragloom-embed-batcher", daemon=True)
        self._worker.start()

    def __getattr__(self, name: str) -> Any:  # the inner embedder's extras (e.g. its tokenizer)
        return getattr(self.inner, name)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        future: Future[np.ndarray] = Future()
        with self._cond:
            if self._closed:
                raise EmbeddingError("the embedder was closed")
            self._pending.append((texts, future))
            self.requests += 1
            self._cond.notify()
        return future.result()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if self._closed and not self._pending:
                    return
                batch, size = [], 0
                while self._pending and (not batch or size + len(self._pending[0][0]) <= self.max_batch):
                    texts, future = self._pending.pop(0)
                    batch.append((texts, future))
                    size += len(texts)
            try:
                vectors = self.inner.encode([t for texts, _ in batch for t in texts])
                self.batches += 1
            except BaseException as e:  # every waiter gets the model's error, the worker goes on
                for _, future in batch:
                    future.set_exception(e)
                continue
            offset = 0
            for texts, future in batch:
                future.set_result(vectors[offset:offset + len(texts)])
                offset += len(texts)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._worker.join(timeout=5)
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()
