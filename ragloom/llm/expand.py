"""Running one query's transforms: rewrite first, model calls fanned out in parallel under one deadline while
the first pass runs, feedback after it, then one search per generated query (in parallel). The lists go back
to ``Retriever.search``, which fuses them with the first pass by RRF before post-processing.

    expansion = Expansion(["hyde", "multi_query"], llm, timeout=30)
    query = expansion.rewrite(question)
    result = retriever.search(query, k=5, expansion=expansion)   # result.metadata["transforms"], ["generated_queries"]
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import numpy as np

from ragloom.errors import RagloomError
from ragloom.llm.client import LLMClient
from ragloom.llm.transforms import QueryTransform, TransformOutput, get_transform
from ragloom.types import RetrievedItem

PHASES = ("rewrite", "expand", "feedback")


class Expansion:
    """One question's transforms. Unknown names fail at construction; a transform that fails or runs past the
    deadline is recorded in the metadata and left out (the query still answers from the others)."""

    def __init__(self, names: Sequence[str], llm: LLMClient | None, timeout: float = 30.0,
                 options: dict[str, dict[str, Any]] | None = None) -> None:
        options = options or {}
        ordered = list(dict.fromkeys(names))  # a name given twice runs once
        self.transforms: list[QueryTransform] = [get_transform(n, llm, **options.get(n, {})) for n in ordered]
        self.timeout = timeout
        self.outputs: dict[str, TransformOutput] = {}
        self.original_query = ""
        self.rewritten_query = ""
        self._pool = ThreadPoolExecutor(max_workers=max(4, len(self.transforms) * 2),
                                        thread_name_prefix="ragloom-transform")
        self._futures: dict[str, Future[TransformOutput]] = {}
        self._deadline = 0.0
        self._timings: dict[str, float] = {}

    def _of(self, phase: str) -> list[QueryTransform]:
        return [t for t in self.transforms if t.phase == phase]

    def _remaining(self) -> float:
        return max(0.0, self._deadline - time.monotonic())

    def _collect(self, name: str, future: Future[TransformOutput]) -> TransformOutput:
        try:
            return future.result(timeout=self._remaining())
        except FutureTimeout:
            future.cancel()
            return TransformOutput(name, error=f"timed out: all transforms together have {self.timeout:g}s")

    def rewrite(self, question: str) -> str:
        """Starts the expand-phase transforms on ``question`` and returns the query the strategy should run:
        the reformulated one when ``reformulate`` was asked for (and worked), else ``question``."""
        started = time.perf_counter()
        self._deadline = time.monotonic() + self.timeout
        self.original_query = self.rewritten_query = question
        for t in self._of("expand"):
            self._futures[t.name] = self._pool.submit(t.run, question)
        for t in self._of("rewrite"):
            out = self._collect(t.name, self._pool.submit(t.run, question))
            self.outputs[t.name] = out
            if out.queries:
                self.rewritten_query = out.queries[0]
        self._timings["rewrite"] = (time.perf_counter() - started) * 1000
        return self.rewritten_query

    def __call__(self, retriever: Any, request: Any, options: dict[str, Any],
                 first_pass: list[RetrievedItem]) -> dict[str, list[RetrievedItem]]:
        """The ``expand`` hook of ``Retriever.search``: more ranked lists, one per generated query."""
        if not self._deadline:  # search called without rewrite(): start now
            self.rewrite(request.query)
        started = time.perf_counter()
        for name, future in self._futures.items():
            self.outputs[name] = self._collect(name, future)
        for t in self._of("feedback"):
            self.outputs[t.name] = t.run(request.query, first_pass)
        self._timings["transforms_wait"] = (time.perf_counter() - started) * 1000
        generated = [(f"{name}:{i}", q) for name, out in self.outputs.items()
                     if name in {t.name for t in self._of("expand") + self._of("feedback")}
                     for i, q in enumerate(out.queries, start=1)]
        lists = self._search_all(retriever, request, options, generated) if generated else {}
        request.info["transforms"] = {name: {**out.to_dict(), "error": request.context.error_text(out.error)}
                                      if out.error else out.to_dict() for name, out in self.outputs.items()}
        request.info["generated_queries"] = [{"list": label, "query": q} for label, q in generated]
        if self.rewritten_query != self.original_query:
            request.info["original_query"] = self.original_query
        for stage, ms in self._timings.items():
            request.timings_ms[stage] = ms
        return lists

    def _search_all(self, retriever: Any, request: Any, options: dict[str, Any],
                    generated: list[tuple[str, str]]) -> dict[str, list[RetrievedItem]]:
        started = time.perf_counter()
        vectors: list[np.ndarray | None] = [None] * len(generated)
        if retriever.name != "bm25":  # one embedding batch for every generated query
            with request.stage("embed_generated"):
                encoded = request.context.embedder.encode([q for _, q in generated])
            vectors = [np.asarray(v, dtype=np.float32) for v in encoded]

        def one(index: int) -> tuple[str, list[RetrievedItem] | str]:
            label, query = generated[index]
            sub = dataclasses.replace(request, query=query, lanes_run=[], fallbacks=[], timings_ms={}, info={},
                                      _vector=vectors[index])
            try:
                items = retriever.get_search_results(sub, **options)
            except RagloomError as e:
                return label, f"{type(e).__name__}: {request.context.error_text(e)}"
            for item in items:  # the first pass's lane scores (e.g. its dense cosine) stay unambiguous
                item.lane_scores = {f"{label}:{lane}": s for lane, s in item.lane_scores.items()}
            return label, items

        lists: dict[str, list[RetrievedItem]] = {}
        errors = {}
        for label, got in self._pool.map(one, range(len(generated))):
            if isinstance(got, str):
                errors[label] = got
            else:
                lists[label] = got
        if errors:
            request.info["generated_query_errors"] = errors
        self._timings["transforms_search"] = (time.perf_counter() - started) * 1000
        return lists

    @property
    def tokens(self) -> tuple[int, int]:
        return (sum(o.tokens_in for o in self.outputs.values()), sum(o.tokens_out for o in self.outputs.values()))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> Expansion:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
