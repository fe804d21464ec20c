"""Searching and fetching chunks: every read takes the store-neutral filter tree and translates it here."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import numpy as np

from ragloom.errors import StoreError
from ragloom.filters import META_PREFIX, Node
from ragloom.metadata import MetadataLayout
from ragloom.stores.analysis import ANALYZER, analyze_query
from ragloom.stores.weaviate.errors import store_errors
from ragloom.stores.weaviate.filters import to_weaviate
from ragloom.stores.weaviate.inventory import Inventory, default_vector
from ragloom.types import HEADING_SEPARATOR, RetrievedItem

BM25_PROPERTIES = ["text", "heading_path"]  # collections written before the stemmed property
ANALYZED_PROPERTIES = ["bm25_text"]
FETCH_BATCH = 1000
RETURN_PROPERTIES = None  # every property: meta_ ones appear as ingestion adds them; a named list would go stale
ID_PROPERTIES = ["chunk_id"]  # an ids_only search: decoding 50 whole chunks with their vectors costs the client
# ~3 ms and Weaviate ~3.7 ms more than their ids (1,466-chunk collection, hybrid k = 50)
HYBRID_FUSIONS = ("relative_score", "ranked")


class Reads(Inventory):
    """``where`` is a ``ragloom.filters`` tree (``build_where``: the scope and the user's filters) or None."""

    def near_vector(self, strategy: str, vector: Sequence[float] | np.ndarray, k: int, where: Node | None = None,
                    include_vectors: bool = False, ids_only: bool = False) -> list[RetrievedItem]:
        """Nearest chunks by cosine; lane_scores {"dense": cosine similarity}. ``ids_only``: chunk ids and scores."""
        from weaviate.classes.query import MetadataQuery

        include_vectors, returned = _asked(include_vectors, ids_only)
        with self._query_errors(strategy, "near_vector"):
            res = self._collection(strategy).query.near_vector(
                near_vector=_as_list(vector), limit=k, filters=to_weaviate(where), include_vector=include_vectors,
                return_metadata=MetadataQuery(distance=True), return_properties=returned)
        items = []
        for obj in res.objects:
            similarity = 1.0 - float(obj.metadata.distance if obj.metadata.distance is not None else 1.0)
            items.append(_item(obj, similarity, {"dense": similarity}, include_vectors, self.metadata))
        return _ranked(items)

    def bm25(self, strategy: str, query: str, k: int, where: Node | None = None,
             include_vectors: bool = False, ids_only: bool = False) -> list[RetrievedItem]:
        """BM25 over text and heading path; lane_scores {"bm25": score}. ``ids_only``: chunk ids and scores."""
        from weaviate.classes.query import MetadataQuery

        include_vectors, returned = _asked(include_vectors, ids_only)
        if not query.strip():
            return []
        query, properties = self._bm25_query(strategy, query)
        if not query:  # stopwords only
            return []
        with self._query_errors(strategy, "bm25"):
            res = self._collection(strategy).query.bm25(
                query=query, query_properties=properties, limit=k, filters=to_weaviate(where),
                include_vector=include_vectors, return_metadata=MetadataQuery(score=True),
                return_properties=returned)
        return _ranked([_scored(o, "bm25", include_vectors, self.metadata) for o in res.objects])

    def hybrid(self, strategy: str, query: str, vector: Sequence[float] | np.ndarray, k: int, alpha: float = 0.5,
               fusion: str = "relative_score", where: Node | None = None,
               include_vectors: bool = False, ids_only: bool = False) -> list[RetrievedItem]:
        """Weaviate's native hybrid (BM25 on text + heading path, and the given vector); lane_scores {"hybrid"}.
        ``ids_only``: chunk ids and scores."""
        from weaviate.classes.query import HybridFusion, MetadataQuery

        if fusion not in HYBRID_FUSIONS:
            raise StoreError(f"hybrid fusion {fusion!r}: choose {' or '.join(HYBRID_FUSIONS)}")
        if not 0.0 <= alpha <= 1.0:
            raise StoreError(f"hybrid alpha must be within [0, 1], got {alpha}")
        fusion_type = HybridFusion.RELATIVE_SCORE if fusion == "relative_score" else HybridFusion.RANKED
        include_vectors, returned = _asked(include_vectors, ids_only)
        keywords, properties = self._bm25_query(strategy, query)
        with self._query_errors(strategy, "hybrid"):
            res = self._collection(strategy).query.hybrid(
                query=keywords or query, vector=_as_list(vector), alpha=alpha, fusion_type=fusion_type,
                query_properties=properties, limit=k, filters=to_weaviate(where), include_vector=include_vectors,
                return_metadata=MetadataQuery(score=True), return_properties=returned)
        return _ranked([_scored(o, "hybrid", include_vectors, self.metadata) for o in res.objects])

    def _bm25_query(self, strategy: str, query: str) -> tuple[str, list[str]]:
        """(query text, properties) for BM25: the analysed query on ``bm25_text`` when the collection was
        written with the current analyzer, else the raw query on text and heading path (older collections,
        until their next sync rebuilds them)."""
        name = self.collection_name(strategy)
        if name not in self._bm25_analyzed:
            info = self.collection_info(strategy) or {}
            self._bm25_analyzed[name] = info.get("bm25") == ANALYZER
        if self._bm25_analyzed[name]:
            return analyze_query(query), ANALYZED_PROPERTIES
        return query, BM25_PROPERTIES

    def fetch(self, strategy: str, chunk_ids: Sequence[str], where: Node | None = None,
              include_vectors: bool = False) -> list[RetrievedItem]:
        """The chunks with these ids (that also match ``where``), in the order asked; missing ids are skipped."""
        from weaviate.classes.query import Filter
        from weaviate.util import generate_uuid5

        ids = list(dict.fromkeys(chunk_ids))
        if not ids:
            return []
        collection = self._collection(strategy)
        also = to_weaviate(where)
        found: dict[str, RetrievedItem] = {}
        for begin in range(0, len(ids), FETCH_BATCH):
            part = ids[begin:begin + FETCH_BATCH]
            flt = Filter.by_id().contains_any([generate_uuid5(c) for c in part])
            with self._query_errors(strategy, "fetch"):
                res = collection.query.fetch_objects(filters=flt if also is None else flt & also, limit=len(part),
                                                     include_vector=include_vectors,
                                                     return_properties=RETURN_PROPERTIES)
            for obj in res.objects:
                item = _item(obj, 0.0, {}, include_vectors, self.metadata)
                found[item.chunk_id] = item
        return _ranked([found[c] for c in ids if c in found])

    def fetch_where(self, strategy: str, where: Node | None, limit: int,
                    include_vectors: bool = False) -> list[RetrievedItem]:
        """Up to ``limit`` chunks matching ``where``, unranked (score 0.0, ordered by chunk id): ask for one more
        than you can use to learn whether there were more."""
        with self._query_errors(strategy, "fetch_where"):
            res = self._collection(strategy).query.fetch_objects(filters=to_weaviate(where), limit=limit,
                                                                 include_vector=include_vectors,
                                                                 return_properties=RETURN_PROPERTIES)
        items = sorted((_item(obj, 0.0, {}, include_vectors, self.metadata) for obj in res.objects),
                       key=lambda item: item.chunk_id)
        return _ranked(items)

    def _query_errors(self, strategy: str, what: str) -> AbstractContextManager[None]:
        """store_errors, saying so when the cause is a missing collection (checked only on failure, so a
        query costs one round trip)."""
        name = self.collection_name(strategy)

        def missing() -> str | None:
            return None if self.exists(strategy) else (f"collection {name} does not exist: index the "
                                                       f"{strategy!r} chunks first")

        return store_errors(f"{what} on {name}", explain=missing)


def _asked(include_vectors: bool, ids_only: bool) -> tuple[bool, list[str] | None]:
    """What a search returns: (with vectors, properties); ``ids_only`` asks for the chunk id alone."""
    return (False, ID_PROPERTIES) if ids_only else (include_vectors, RETURN_PROPERTIES)


def _scored(obj: Any, lane: str, include_vectors: bool, layout: MetadataLayout) -> RetrievedItem:
    score = float(obj.metadata.score or 0.0)
    return _item(obj, score, {lane: score}, include_vectors, layout)


def _item(obj: Any, score: float, lanes: dict[str, float], include_vectors: bool,
          layout: MetadataLayout) -> RetrievedItem:
    props = {}
    for key, value in obj.properties.items():
        if key.startswith(META_PREFIX):
            if value is None:  # a key of other chunks, not this one
                continue
            # an undeclared key is stored as a list of texts (ragloom.metadata); a scalar comes back as itself
            if isinstance(value, list) and len(value) == 1 and not layout.is_declared(key):
                value = value[0]
        props[key] = value
    parts = props.pop("heading_parts", None)
    heading = props.pop("heading_path", "") or ""
    metadata: dict[str, Any] = {  # embed_text: only in collections written before 2026-11-28
        k: (v.isoformat() if isinstance(v, datetime) else v)
        for k, v in props.items() if k not in ("chunk_id", "document_id", "text", "embed_text", "bm25_text")
    }
    metadata.setdefault("parent_id", None)
    if include_vectors:
        vector = default_vector(obj.vector)
        metadata["vector"] = _floats(vector) if vector is not None else None
    return RetrievedItem(
        chunk_id=props.get("chunk_id", ""),
        document_id=props.get("document_id", ""),
        text=props.get("text", ""),
        score=score,
        heading_path=list(parts) if parts else ([p for p in heading.split(HEADING_SEPARATOR)] if heading else []),
        lane_scores=lanes,
        metadata=metadata,
    )


def _floats(vector: list[Any]) -> list[float]:
    """The vector as a list of Python floats. The client decodes a vector into Python floats already: then a copy
    (one C call), not a float() per element (a graph_rag query decodes 50-70 vectors of 384)."""
    if vector and type(vector[0]) is float:
        return list(vector)
    return [float(x) for x in vector]


def _as_list(vector: Sequence[float] | np.ndarray) -> list[float]:
    return np.asarray(vector, dtype=np.float32).reshape(-1).tolist()


def _ranked(items: list[RetrievedItem]) -> list[RetrievedItem]:
    for rank, item in enumerate(items, start=1):
        item.rank = rank
    return items
