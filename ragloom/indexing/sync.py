"""What the vector and graph syncs share: the plan (current vs stored), writes overlapped with production, reports.

A sync makes a store hold exactly the current chunks of one chunking strategy. Chunk ids are derived
from content, so an id the store holds is an unchanged chunk: `plan` is a pure diff of ids. The
expensive part (embedding, entity extraction) produces batches that `overlap_writes` stores on writer
threads (one, or a few started in order) while the next batch is produced.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Generic, TypeVar

from ragloom.errors import ConfigError
from ragloom.types import Chunk

T = TypeVar("T")
B = TypeVar("B")
R = TypeVar("R")


@dataclass(frozen=True)
class SyncPlan(Generic[T]):
    new: list[T]  # current items to produce and write, in the order of ``current``
    stale: list[str]  # stored ids no longer current, sorted
    unchanged: int  # current items the store already holds completely

    @property
    def changed(self) -> bool:
        return bool(self.new or self.stale)


def plan(current: Mapping[str, T], stored: Collection[str], incomplete: Collection[str] = ()) -> SyncPlan[T]:
    """Diff the current items (id -> item) against the ids a store holds.

    An id in ``incomplete`` is stored but was not completely written (a run that failed midway): it
    counts as new again if still current, as stale if not.
    """
    new = [item for key, item in current.items() if key not in stored or key in incomplete]
    stale = sorted(key for key in stored if key not in current)
    return SyncPlan(new=new, stale=stale, unchanged=len(current) - len(new))


def current_chunks(sync: str, strategy: str, chunks: Iterable[Chunk]) -> dict[str, Chunk]:
    """chunk id -> chunk, refusing chunks of another strategy (each strategy has its own collection/graph)."""
    chunks = list(chunks)
    other = sorted({c.strategy for c in chunks if c.strategy != strategy})
    if other:
        raise ConfigError(f"{sync}(strategy={strategy!r}) was given chunks of strategy {other}")
    return {c.chunk_id: c for c in chunks}


@dataclass
class WriteTimes:
    work_seconds: float = 0.0  # all write time, overlapped with production or not
    waited_seconds: float = 0.0  # time production stood still waiting for a write: the part not hidden


def overlap_writes(batches: Iterable[B], write: Callable[[B], R], written: Callable[[R], None] | None = None, *,
                   thread_name: str, depth: int = 1) -> WriteTimes:
    """Write each batch on writer threads while the next one is produced (iterating ``batches``).

    Up to ``depth`` writes run at once, started in order. Before batch k+depth is handed to a writer, the
    write of batch k is awaited and ``written`` called with its result in this thread, in order, so a failed
    write (re-raised here) stops the sync: no batch after the ones already in flight is started, and the
    batches before it stay written. ``depth`` 2 lets a write build its request while the one before waits on
    the store (docs/experiments/2026-11-26-weaviate-lean-schema.md).
    """
    if depth < 1:
        raise ConfigError(f"overlap_writes: depth must be >= 1, got {depth}")
    times = WriteTimes()

    def timed(batch: B) -> tuple[R, float]:
        started = time.perf_counter()
        result = write(batch)
        return result, time.perf_counter() - started

    def finish(pending: Future[tuple[R, float]]) -> None:
        waited = time.perf_counter()
        result, seconds = pending.result()
        times.waited_seconds += time.perf_counter() - waited
        times.work_seconds += seconds
        if written is not None:
            written(result)

    with ThreadPoolExecutor(max_workers=depth, thread_name_prefix=thread_name) as writers:
        pending: deque[Future[tuple[R, float]]] = deque()
        for batch in batches:
            if len(pending) == depth:
                finish(pending.popleft())
            pending.append(writers.submit(timed, batch))
        while pending:
            finish(pending.popleft())
    return times


@dataclass
class SyncReport:
    """What one sync did; subclasses add their store's counts and list derived figures in ``derived``."""

    strategy: str
    seconds: float = 0.0  # the whole sync, wall time

    derived: ClassVar[tuple[str, ...]] = ()  # properties asset metadata shows beside the fields

    def as_metadata(self) -> dict[str, Any]:
        """Flat numbers and short strings for asset metadata (floats rounded), derived figures included."""
        values = {f.name: getattr(self, f.name) for f in fields(self)} | {n: getattr(self, n) for n in self.derived}
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in values.items()
                if isinstance(v, (int, float, str))}
