"""What retrieval needs from the stores, as structural types: any object with these methods will do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, Self

import numpy as np

from ragloom.filters import Node
from ragloom.types import RetrievedItem


class VectorStore(Protocol):
    """Chunks searchable by vector and keyword, one collection per chunking strategy (``WeaviateStore``).

    ``where`` is a ``ragloom.filters`` tree; the store translates it to its own query language. Results are
    ranked from 1 and carry ``lane_scores``.
    """

    def property_types(self, strategy: str, refresh: bool = False) -> dict[str, str]:
        """Property -> data type name (TEXT, INT, NUMBER, DATE, BOOL, *_ARRAY) of the strategy's collection,
        to bind filters against; ``refresh`` re-reads it. Raises StoreError when it cannot be read."""
        ...

    # ids_only: each item carries its chunk id, score and lane score, nothing else (no text, metadata or vector):
    # for a caller that ranks many candidates and reads the few it returns with ``fetch``
    def near_vector(self, strategy: str, vector: Sequence[float] | np.ndarray, k: int, where: Node | None = None,
                    include_vectors: bool = False, ids_only: bool = False) -> list[RetrievedItem]: ...

    def bm25(self, strategy: str, query: str, k: int, where: Node | None = None,
             include_vectors: bool = False, ids_only: bool = False) -> list[RetrievedItem]: ...

    def hybrid(self, strategy: str, query: str, vector: Sequence[float] | np.ndarray, k: int, alpha: float = 0.5,
               fusion: str = "relative_score", where: Node | None = None,
               include_vectors: bool = False, ids_only: bool = False) -> list[RetrievedItem]: ...

    def fetch(self, strategy: str, chunk_ids: Sequence[str], where: Node | None = None,
              include_vectors: bool = False) -> list[RetrievedItem]: ...

    def fetch_where(self, strategy: str, where: Node | None, limit: int,
                    include_vectors: bool = False) -> list[RetrievedItem]: ...


class GraphStore(Protocol):
    """What graph retrieval reads (``Neo4jStore``): a version that changes with the graph of a chunking
    strategy, and that graph as columns (ragloom.retrieval.graph_index builds its in-process snapshot from them)."""

    def graph_version(self, strategy: str) -> str | None: ...

    def retrieval_graph_rows(self, strategy: str) -> dict[str, dict[str, list[Any]]]: ...

    def retrieval_name_vectors(self, model: str) -> tuple[list[str], Any]: ...


class Closing:
    """``close`` and ``with`` for a store whose client or driver is either its own (opened by ``connect``: closed
    with the store) or handed in (left open for its owner)."""

    _owns_connection: bool = False

    def _close_connection(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        if self._owns_connection:
            self._close_connection()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
