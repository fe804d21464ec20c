"""Entity-name embeddings and synonym edges: each new entity is linked to the entities whose names embed close.

Incremental: only entities without an embedding from the current embedder and settings are embedded,
and each is compared with every entity of the namespace already embedded (and with the other new ones),
never all pairs again. Changing the embedder or the synonym settings redoes every entity at the next sync.
Exact cosine kNN in numpy, by blocks: an ingest of n new entities into a graph of N costs n x (N + n) dot
products. A pair is linked once, (:Entity)-[:SYNONYM {score}]->(:Entity) from the smaller entity id to the
larger. Never linked, whatever the cosine: entities of different kinds (a person and a place; see
``type_kind``), which resolution kept apart on evidence, and names that differ by a number, a roman
numeral or a contrastive word ("35th"/"36th Chess Olympiad", "Southern"/"Northern Netherlands"), which
MiniLM scores 0.89-0.96.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ragloom.embedding.base import Embedder
from ragloom.errors import ConfigError
from ragloom.extraction.resolution import contrasting_names, type_kind
from ragloom.indexing.vectors import encode_cached
from ragloom.settings import Settings
from ragloom.stores.embedding_cache import EmbeddingCache
from ragloom.stores.neo4j import Neo4jStore
from ragloom.types import Log, no_log

SIMILARITIES_PER_BLOCK = 1 << 23  # float32 scores held at once (32 MB)


@dataclass(frozen=True)
class SynonymParams:
    threshold: float = 0.8  # RAGLOOM_GRAPH_SYNONYM_THRESHOLD: least cosine between two names to link them
    neighbours: int = 10  # RAGLOOM_GRAPH_SYNONYM_NEIGHBOURS: most links a new entity makes (0: none)

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise ConfigError(f"synonym threshold must be in (0, 1], got {self.threshold}")
        if self.neighbours < 0:
            raise ConfigError(f"synonym neighbours must be >= 0, got {self.neighbours}")

    @property
    def key(self) -> str:
        """Stored on each linked entity: other settings link it again."""
        return f"threshold={self.threshold:g};neighbours={self.neighbours}"

    @classmethod
    def from_settings(cls, settings: Settings) -> SynonymParams:
        return cls(threshold=settings.graph_synonym_threshold, neighbours=settings.graph_synonym_neighbours)


def synonym_pairs(new_ids: Sequence[str], new_vectors: np.ndarray, new_kinds: Sequence[str],
                  old_ids: Sequence[str], old_vectors: np.ndarray, old_kinds: Sequence[str],
                  params: SynonymParams, names: Mapping[str, str] | None = None) -> list[tuple[str, str, float]]:
    """(source id, target id, cosine) for every new entity and its ``params.neighbours`` nearest entities of
    the same kind, old or new, with cosine >= ``params.threshold``; rows of the vectors are unit length.
    With ``names`` (id -> name), pairs of ``contrasting_names`` are left out. Each pair once, source <
    target; sorted."""
    n_new = len(new_ids)
    if n_new == 0 or params.neighbours == 0:
        return []
    ids = [*old_ids, *new_ids]
    vectors = np.vstack([old_vectors, new_vectors]).astype(np.float32, copy=False) if len(old_ids) else \
        np.asarray(new_vectors, dtype=np.float32)
    offset = len(old_ids)  # new row i is row offset + i of ``vectors``
    members: dict[str, list[int]] = {}
    for row, kind in enumerate([*old_kinds, *new_kinds]):
        members.setdefault(kind, []).append(row)
    best: dict[tuple[str, str], float] = {}
    # Kind by kind: an entity is only ever compared with entities of its own kind (a fraction of the products
    # and scores a mask over all entities would cost).
    for rows_of_kind in members.values():
        rows = np.asarray(rows_of_kind)
        first_new = int(np.searchsorted(rows, offset))  # rows ascend: the kind's new entities come last
        k = min(params.neighbours, len(rows) - 1)
        if first_new == len(rows) or k <= 0:
            continue
        group = vectors[rows]
        block = max(1, SIMILARITIES_PER_BLOCK // len(rows))
        for start in range(first_new, len(rows), block):
            local = np.arange(start, min(start + block, len(rows)))
            scores = group[local] @ group.T
            scores[np.arange(len(local)), local] = -np.inf  # not its own synonym
            # Most names have no neighbour above the threshold, and a row with at most k has exactly those
            # as its links (each scores above every other entity of the row): only rows with more than k
            # are ranked, each as a whole row, so the k kept are the ones ranking all rows would keep.
            above = scores >= params.threshold
            counts = above.sum(axis=1)
            for r, j in zip(*np.nonzero(above & (counts <= k)[:, None]), strict=True):
                _link(best, ids[rows[local[r]]], ids[rows[j]], scores[r, j], names)
            crowded = np.flatnonzero(counts > k)
            if len(crowded):
                ranked = scores[crowded]
                top = np.argpartition(-ranked, k - 1, axis=1)[:, :k]
                top_scores = np.take_along_axis(ranked, top, axis=1)
                for r, j in zip(*np.nonzero(top_scores >= params.threshold), strict=True):
                    _link(best, ids[rows[local[crowded[r]]]], ids[rows[top[r, j]]], top_scores[r, j], names)
    return sorted((a, b, s) for (a, b), s in best.items())


def _link(best: dict[tuple[str, str], float], x: str, y: str, score: float, names: Mapping[str, str] | None) -> None:
    """Keep the pair (smaller id, larger id) at its highest score, unless the names contrast."""
    a, b = sorted((x, y))
    if names is None or not contrasting_names(names[a], names[b]):
        best[(a, b)] = max(best.get((a, b), -1.0), round(float(score), 6))


@dataclass
class SynonymStats:
    entities_embedded: int = 0
    synonym_edges: int = 0  # SYNONYM edges written (each pair once)
    seconds: float = 0.0  # embedding, kNN and writes
    embed_seconds: float = 0.0  # of it, the embedder (cache lookups included)
    names_cached: int = 0  # distinct names whose vector came from the embedding cache


class SynonymLinker:
    """Embeds the names of entities that lack an embedding from ``embedder`` (or were linked with other
    ``params``) and links their synonyms.

    The namespace's embedded entities are read once, on the first call that has something to embed, and
    kept in memory for the calls after it (one sync's waves). Not thread-safe: call from one thread.

    Each distinct name is embedded once per call; with a ``cache`` (the embedding cache the vector lane uses,
    keyed by model id and text) a name embedded by any earlier sync, in any namespace, is not embedded again.
    """

    def __init__(self, store: Neo4jStore, embedder: Embedder, params: SynonymParams | None = None,
                 log: Log = no_log, cache: EmbeddingCache | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.cache = cache
        self.params = params or SynonymParams()
        self.log = log
        self.stats = SynonymStats()
        self._ids: list[str] | None = None
        self._kinds: list[str] = []
        self._names: dict[str, str] = {}
        self._vectors = np.zeros((0, embedder.dimension), dtype=np.float32)

    def share_cores(self) -> None:
        """Other processes (the extraction's workers) keep the cores busy: embed names on one thread, for the
        same vectors with less CPU (docs/experiments/2026-11-26-synonym-pass-speed.md). The kNN keeps BLAS's
        threads: on one, its products sum in another order and ~1% of the scores move in the 6th decimal."""
        self.embedder = self.embedder.single_threaded()

    def link(self, entity_ids: Iterable[str] | None = None) -> int:
        """Embed and link the entities among ``entity_ids`` (None: all of the namespace) without an embedding
        from this embedder; returns how many. Synonym edges are written before the embeddings, so an entity
        whose embedding is stored has all its edges, and one interrupted between the two is redone."""
        started = time.perf_counter()
        model = self.embedder.model_id
        rows = self.store.entities_to_embed(model, self.params.key,
                                            None if entity_ids is None else sorted(set(entity_ids)))
        if not rows:
            return 0
        if self._ids is None:
            self._load(model)
        ids = [r["entity_id"] for r in rows]
        kinds = [type_kind(r["type"] or "") for r in rows]
        self._names.update((r["entity_id"], r["name"] or "") for r in rows)
        embedding = time.perf_counter()
        vectors = self._embed_names([r["name"] or "" for r in rows])
        self.stats.embed_seconds += time.perf_counter() - embedding
        assert self._ids is not None
        pairs = synonym_pairs(ids, vectors, kinds, self._ids, self._vectors, self._kinds, self.params, self._names)
        self.store.drop_synonyms(ids)  # edges from an earlier embedder or other synonym settings
        self.store.write_synonyms(pairs)
        self.store.write_entity_embeddings(ids, vectors, model, self.params.key)
        self._ids.extend(ids)
        self._kinds.extend(kinds)
        self._vectors = np.vstack([self._vectors, vectors])
        self.stats.entities_embedded += len(ids)
        self.stats.synonym_edges += len(pairs)
        self.stats.seconds += time.perf_counter() - started
        return len(ids)

    def _embed_names(self, names: list[str]) -> np.ndarray:
        """Unit vectors of ``names``, each distinct name embedded (or read from the cache) once."""
        distinct = list(dict.fromkeys(names))
        if self.cache is None:
            vectors = self.embedder.encode(distinct)
        else:
            vectors, hits = encode_cached(self.embedder, self.cache, distinct)
            self.stats.names_cached += hits
        row = {name: i for i, name in enumerate(distinct)}
        return _unit(vectors)[[row[name] for name in names]]

    def _load(self, model: str) -> None:
        ids, names, types, vectors = self.store.entity_embeddings(model, self.params.key)
        self._names.update(zip(ids, (n or "" for n in names), strict=True))
        if vectors.shape[0] and vectors.shape[1] != self.embedder.dimension:
            raise ConfigError(f"graph namespace {self.store.namespace!r} holds {vectors.shape[1]}-dimensional "
                              f"entity embeddings from {model}, which now makes {self.embedder.dimension}")
        self._ids, self._kinds = list(ids), [type_kind(t or "") for t in types]
        self._vectors = vectors.astype(np.float32, copy=False).reshape(len(ids), self.embedder.dimension)
        if ids:
            self.log(f"synonyms: {len(ids)} entities already embedded in namespace {self.store.namespace!r}")


def _unit(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (embedders promise it; a zero row stays zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)
