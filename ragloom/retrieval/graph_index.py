"""The in-process retrieval graph of one (namespace, chunking strategy): chunks and entities as one sparse
matrix for Personalized PageRank, built from the Neo4j graph and rebuilt when its version changes.

Nodes ``0 .. n_chunks - 1`` are chunks, ``n_chunks ..`` are entities. Edges (symmetric):
chunk–entity for every MENTIONS (weight: mention count), entity–entity for every RELATED_TO (weight: its
evidence weight × a factor per kind: subject-verb-object relations above co-occurrence), and entity–entity
SYNONYM edges when the graph has them. Relation evidence is kept per chunk, so a query that may read only
some scopes walks only the edges its readable chunks support (``walk_matrix``).
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ragloom.errors import RagloomError
from ragloom.retrieval import ppr

log = logging.getLogger(__name__)

COOCCURS = "CO_OCCURS"
SYNONYM = "SYNONYM"
# Edge families a relation filter may name besides single predicates.
FAMILIES = {"svo": "every subject-verb-object predicate", "co_occurs": "same-sentence co-occurrence",
            "synonym": "entities whose names embed alike"}
_PREDICATE = re.compile(r"[^A-Z0-9_]+")
MATRIX_CACHE = 8  # walk matrices kept per graph (one per visible-scope set and edge weighting)


@dataclass(frozen=True)
class EdgeWeights:
    """Factors on each kind of entity–entity edge (MENTIONS edges weigh their mention count)."""

    svo: float = 2.0
    cooccurrence: float = 0.5
    synonym: float = 1.0
    synonym_min_score: float = 0.0  # synonym edges below this similarity are left out
    relations: tuple[str, ...] = ()  # what is walked (see relation_filter); empty: every edge


def predicate_name(text: str) -> str:
    """A predicate as the extractor writes it: "led by" -> "LED_BY", "found" -> "FOUND"."""
    return _PREDICATE.sub("_", text.strip().upper()).strip("_")


def relation_filter(relations: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(edge families, single predicates) a filter names: a family from ``FAMILIES`` (any case), else an SVO
    predicate in the extractor's spelling. Empty families and predicates mean every edge is walked."""
    families, predicates = set(), set()
    for item in relations:
        name = item.strip().lower().replace("-", "_")
        if name in ("cooccurrence", "co_occurrence"):
            name = "co_occurs"
        if name in FAMILIES:
            families.add(name)
        elif predicate_name(item):
            predicates.add(predicate_name(item))
    return frozenset(families), frozenset(predicates)


def walked_types(types: Sequence[str], relations: Iterable[str]) -> np.ndarray:
    """Boolean per relation type: does the filter ``relations`` walk it?"""
    families, predicates = relation_filter(relations)
    if not families and not predicates:
        return np.ones(len(types), dtype=bool)
    return np.array([("co_occurs" in families) if t == COOCCURS else ("svo" in families or t in predicates)
                     for t in types], dtype=bool)


def walks_synonyms(relations: Iterable[str]) -> bool:
    families, predicates = relation_filter(relations)
    return (not families and not predicates) or "synonym" in families


@dataclass
class Walk:
    """What one query walks: P^T and the dangling mask of the visible graph, and which nodes are visible."""

    transposed: sp.csr_matrix
    dangling: np.ndarray
    visible_chunks: np.ndarray  # bool per chunk
    visible_entities: np.ndarray  # bool per entity
    relation_weight: np.ndarray | None = None  # per relation, its walked weight (0: not walked)
    derived: dict[str, Any] = field(default_factory=dict, repr=False)  # per-walk structures readers build once


@dataclass
class RetrievalGraph:
    """A read-only snapshot; build it with :func:`build_graph`."""

    version: Any
    chunk_ids: list[str]
    chunk_scope: np.ndarray  # int32 code into ``scopes`` per chunk
    scopes: list[str]
    entity_names: list[str]
    entity_types: list[str]
    norm_index: dict[str, list[int]]  # normalised name or alias -> entity indexes
    mentions: sp.csr_matrix  # chunks × entities, mention counts
    relation_pairs: np.ndarray  # (n_relations, 2) entity indexes
    relation_types: list[str]
    relation_evidence: sp.csr_matrix  # relations × chunks, evidence weight per chunk
    synonyms: sp.csr_matrix  # entities × entities, similarity (one direction)
    load_seconds: float = 0.0
    entity_ids: list[str] = field(default_factory=list)
    _name_vectors: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)
    _chunk_index: dict[str, int] = field(default_factory=dict, repr=False)
    _pair_index: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)  # relations_between's
    _walks: OrderedDict[Any, Walk] = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self._chunk_index = {c: i for i, c in enumerate(self.chunk_ids)}
        self.word_index: dict[str, list[int]] = {}  # word of a normalised name -> entity indexes
        self.max_name_words = 0  # words in the longest normalised name or alias
        for norm, entities in self.norm_index.items():
            words = set(norm.split())
            self.max_name_words = max(self.max_name_words, len(words))
            for word in words:
                self.word_index.setdefault(word, []).extend(entities)
        self.chunk_frequency = np.asarray((self.mentions > 0).sum(axis=0)).ravel().astype(np.float64)
        self.mentions_t = self.mentions.T.tocsr()

    @property
    def n_chunks(self) -> int:
        return len(self.chunk_ids)

    @property
    def n_entities(self) -> int:
        return len(self.entity_names)

    def chunk_node(self, chunk_id: str) -> int | None:
        return self._chunk_index.get(chunk_id)

    def relations_between(self, u: int, v: int) -> np.ndarray:
        """The relations between entities ``u`` and ``v``, either direction, ascending: a binary search in the
        relations sorted by their unordered pair (built on first use, 16 bytes a relation), not a scan of all."""
        if self._pair_index is None:
            pairs = self.relation_pairs.astype(np.int64).reshape(-1, 2)
            keys = pairs.min(axis=1) * self.n_entities + pairs.max(axis=1)
            order = np.argsort(keys, kind="stable")  # ties keep ascending relation ids
            self._pair_index = (keys[order], order)
        keys, order = self._pair_index
        key = min(u, v) * self.n_entities + max(u, v)
        return order[np.searchsorted(keys, key, "left"):np.searchsorted(keys, key, "right")]

    def entities_of(self, chunk: int) -> np.ndarray:
        row = self.mentions
        return row.indices[row.indptr[chunk]:row.indptr[chunk + 1]]

    def match_names(self, norms: Iterable[str], partial_limit: int = 3) -> list[int]:
        """Entity indexes whose normalised name or alias is one of ``norms``; a name of two or more words with
        no exact match also matches entities whose name holds all its words ("peter bonetti" -> "peter
        phillip bonetti"), when at most ``partial_limit`` do."""
        out: dict[int, None] = {}
        for norm in norms:
            exact = self.norm_index.get(norm, ())
            words = norm.split()
            if not exact and len(words) >= 2 and partial_limit > 0:
                holders = set(self.word_index.get(words[0], ()))
                for word in words[1:]:
                    holders &= set(self.word_index.get(word, ()))
                    if not holders:
                        break
                exact = sorted(holders) if len(holders) <= partial_limit else ()
            for entity in exact:
                out.setdefault(entity, None)
        return list(out)

    def similar_names(self, model: str, vectors: np.ndarray, min_score: float, per_name: int = 1) -> list[int]:
        """For each unit row of ``vectors`` (names embedded by ``model``), the ``per_name`` entities whose stored
        name embedding is closest, when the cosine is at least ``min_score``; needs :meth:`set_name_vectors`."""
        entities, matrix = self._name_vectors.get(model, (np.zeros(0, np.int64), np.zeros((0, 0), np.float32)))
        if not len(entities) or not len(vectors):
            return []
        scores = np.asarray(vectors, dtype=np.float32) @ matrix.T
        out: dict[int, None] = {}
        for row in scores:
            for j in np.argsort(-row, kind="stable")[:per_name]:
                if row[j] >= min_score:
                    out.setdefault(int(entities[j]), None)
        return list(out)

    def has_name_vectors(self, model: str) -> bool:
        return model in self._name_vectors

    def set_name_vectors(self, model: str, entity_ids: Sequence[str], vectors: np.ndarray) -> None:
        """Keep the name embeddings of ``model`` for the snapshot's entities (others' are dropped)."""
        index = {e: i for i, e in enumerate(self.entity_ids)}
        found = _lookup(index, entity_ids, len(entity_ids))
        keep = found >= 0
        self._name_vectors[model] = (found[keep], np.ascontiguousarray(np.asarray(vectors, np.float32)[keep]))

    def visible_chunks(self, scope_paths: Sequence[str] | None) -> np.ndarray:
        if scope_paths is None:
            return np.ones(self.n_chunks, dtype=bool)
        codes = [i for i, s in enumerate(self.scopes) if s in set(scope_paths)]
        return np.isin(self.chunk_scope, codes)

    def walk_matrix(self, scope_paths: Sequence[str] | None, weights: EdgeWeights = EdgeWeights()) -> Walk:
        """The walk over what ``scope_paths`` may read (None: everything), cached per visible set."""
        paths = None if scope_paths is None else set(scope_paths)
        key = (tuple(i for i, s in enumerate(self.scopes) if paths is None or s in paths), weights)
        with self._lock:
            walk = self._walks.get(key)
            if walk is not None:
                self._walks.move_to_end(key)
                return walk
        walk = self._build_walk(self.visible_chunks(scope_paths), weights)
        with self._lock:
            self._walks[key] = walk
            while len(self._walks) > MATRIX_CACHE:
                self._walks.popitem(last=False)
        return walk

    def _build_walk(self, visible: np.ndarray, weights: EdgeWeights) -> Walk:
        keep = sp.diags(visible.astype(np.float64))
        mentions = (keep @ self.mentions).tocsr()
        visible_entities = np.asarray(mentions.sum(axis=0)).ravel() > 0
        # a relation counts only the evidence of readable chunks
        evidence = self.relation_evidence @ visible.astype(np.float64)
        factor = np.array([weights.cooccurrence if t == COOCCURS else weights.svo for t in self.relation_types],
                          dtype=np.float64)
        factor *= walked_types(self.relation_types, weights.relations)
        w = evidence * factor if len(factor) else evidence
        pairs = self.relation_pairs
        n = self.n_entities
        relations = sp.csr_matrix((w, (pairs[:, 0], pairs[:, 1])), shape=(n, n)) if len(w) else sp.csr_matrix((n, n))
        synonyms = self.synonyms.copy()
        synonyms.data[synonyms.data < weights.synonym_min_score] = 0.0
        if not walks_synonyms(weights.relations):
            synonyms.data[:] = 0.0
        entity_edges = relations + relations.T + weights.synonym * (synonyms + synonyms.T)
        entity_edges.setdiag(0)
        adjacency = sp.bmat([[None, mentions], [mentions.T, entity_edges]], format="csr")
        node_visible = np.concatenate([visible, visible_entities])
        transposed, dangling = ppr.transition(adjacency, node_visible)
        return Walk(transposed, dangling, visible, visible_entities, np.asarray(w, dtype=np.float64))

    def memory_bytes(self) -> int:
        """Bytes held by the arrays and matrices (names and ids counted by their string sizes)."""
        arrays = [self.chunk_scope, self.relation_pairs, self.chunk_frequency]
        total = sum(a.nbytes for a in arrays)
        total += sum(e.nbytes + v.nbytes for e, v in self._name_vectors.values())
        for m in (self.mentions, self.mentions_t, self.relation_evidence, self.synonyms):
            total += m.data.nbytes + m.indices.nbytes + m.indptr.nbytes
        for walk in list(self._walks.values()):
            t = walk.transposed
            total += t.data.nbytes + t.indices.nbytes + t.indptr.nbytes + walk.dangling.nbytes
        return total


COLUMNS = {
    "chunks": ("chunk_id", "scope_path", "entity_ids", "counts"),
    "entities": ("entity_id", "name", "type", "norm", "alias_norms"),
    "relations": ("source", "target", "type", "chunk_ids", "chunk_weights"),
    "synonyms": ("source", "target", "score"),
}


def _columns(rows: Mapping[str, Any], table: str) -> dict[str, list[Any]]:
    """``rows[table]`` as columns: given as columns already (the store's form) or as a list of row dicts."""
    given = rows.get(table)
    if isinstance(given, Mapping):
        n = len(next(iter(given.values()), []))
        return {name: list(given.get(name) or [None] * n) for name in COLUMNS[table]}
    given = list(given or [])
    return {name: [r.get(name) for r in given] for name in COLUMNS[table]}


def _ordered(columns: dict[str, list[Any]], *keys: str) -> dict[str, list[Any]]:
    """The table's rows sorted by ``keys``. The store returns rows in the order they were written, and parallel
    extraction writes them in no fixed order: sorted, two builds of the same graph get the same indices, so every
    tie broken by an index (the context item's edges, its cited chunks) and every sum over them come out the
    same (docs/experiments/2026-11-26-graph-index-order.md)."""
    if len(columns[keys[0]]) < 2:
        return columns
    # numpy's string sort: the order Python's would give (by code point), ~5x faster on a million rows
    order = np.lexsort([np.array([str(v or "") for v in columns[k]]) for k in reversed(keys)]).tolist()
    return {name: [values[i] for i in order] for name, values in columns.items()}


def _lookup(index: Mapping[str, int], keys: Iterable[Any], count: int) -> np.ndarray:
    """Each key's position in ``index`` (-1 when absent), as an int64 array."""
    get = index.get
    return np.fromiter((get(k, -1) for k in keys), dtype=np.int64, count=count)


def _flat(lists: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
    """The items of ``lists`` end to end, and the length of each list (None counts as empty)."""
    lengths = np.fromiter((len(x) if x else 0 for x in lists), dtype=np.int64, count=len(lists))
    return list(itertools.chain.from_iterable(x for x in lists if x)), lengths


def build_graph(rows: Mapping[str, Any], version: Any = None,
                normalize: Callable[[str], str] | None = None) -> RetrievalGraph:
    """A snapshot from the store's columns (or the same tables as lists of row dicts): ``chunks`` {chunk_id,
    scope_path, entity_ids, counts}, ``entities`` {entity_id, name, type, norm, alias_norms}, ``relations``
    {source, target, type, chunk_ids, chunk_weights} and optionally ``synonyms`` {source, target, score}.
    Relations and synonyms naming an unknown entity, and evidence from chunks outside ``chunks`` (another
    strategy's), are ignored."""
    started = time.perf_counter()
    entities = _ordered(_columns(rows, "entities"), "entity_id")
    entity_index = {e: i for i, e in enumerate(entities["entity_id"])}
    n = len(entities["entity_id"])
    names = [x or "" for x in entities["name"]]
    types = [x or "" for x in entities["type"]]
    norm_index: dict[str, list[int]] = {}
    for i, (norm, aliases) in enumerate(zip(entities["norm"], entities["alias_norms"], strict=True)):
        keys = [norm or (normalize(names[i]) if normalize else names[i].casefold()), *(aliases or ())]
        for key in dict.fromkeys(k for k in keys if k):
            norm_index.setdefault(key, []).append(i)

    chunks = _ordered(_columns(rows, "chunks"), "chunk_id")
    chunk_ids = list(chunks["chunk_id"])
    chunk_index = {c: i for i, c in enumerate(chunk_ids)}
    scopes: dict[str, int] = {}
    chunk_scope = np.array([scopes.setdefault(p or "", len(scopes)) for p in chunks["scope_path"]], dtype=np.int32)
    mentioned, per_chunk = _flat(chunks["entity_ids"])
    counts, _ = _flat(chunks["counts"])
    m_rows = np.repeat(np.arange(len(chunk_ids), dtype=np.int64), per_chunk)
    m_cols = _lookup(entity_index, mentioned, len(mentioned))
    m_vals = np.array([float(c or 1) for c in counts], dtype=np.float32) if len(counts) == len(mentioned) \
        else np.ones(len(mentioned), dtype=np.float32)
    known = m_cols >= 0
    mentions = sp.csr_matrix((m_vals[known], (m_rows[known], m_cols[known])), shape=(len(chunk_ids), n))
    mentions.sum_duplicates()

    relations = _ordered(_columns(rows, "relations"), "source", "target", "type")
    n_rel = len(relations["source"])
    a = _lookup(entity_index, relations["source"], n_rel)
    b = _lookup(entity_index, relations["target"], n_rel)
    evidence_chunks, per_relation = _flat(relations["chunk_ids"])
    weights, _ = _flat(relations["chunk_weights"])
    e_rel = np.repeat(np.arange(n_rel, dtype=np.int64), per_relation)
    e_chunk = _lookup(chunk_index, evidence_chunks, len(evidence_chunks))
    e_vals = np.array(weights, dtype=np.float32) if len(weights) == len(evidence_chunks) \
        else np.ones(len(evidence_chunks), dtype=np.float32)
    valid = (a >= 0) & (b >= 0) & (a != b)
    supported = e_chunk >= 0
    supported &= valid[e_rel] if n_rel else supported
    kept = np.zeros(n_rel, dtype=bool)
    kept[e_rel[supported]] = True  # a relation with no evidence among these chunks is not an edge
    renumber = np.cumsum(kept) - 1
    evidence = sp.csr_matrix((e_vals[supported], (renumber[e_rel[supported]], e_chunk[supported])),
                             shape=(int(kept.sum()), len(chunk_ids)))
    pairs = np.stack([a[kept], b[kept]], axis=1).astype(np.int32).reshape(-1, 2)
    kinds = [t or COOCCURS for t, k in zip(relations["type"], kept, strict=True) if k]

    synonyms_in = _ordered(_columns(rows, "synonyms"), "source", "target")
    n_syn = len(synonyms_in["source"])
    sa = _lookup(entity_index, synonyms_in["source"], n_syn)
    sb = _lookup(entity_index, synonyms_in["target"], n_syn)
    s_vals = np.array([float(x or 1.0) for x in synonyms_in["score"]], dtype=np.float32)
    ok = (sa >= 0) & (sb >= 0) & (sa != sb)
    synonyms = sp.csr_matrix((s_vals[ok], (sa[ok], sb[ok])), shape=(n, n))
    graph = RetrievalGraph(
        version=version, chunk_ids=chunk_ids, chunk_scope=chunk_scope, scopes=list(scopes), entity_names=names,
        entity_types=types, norm_index=norm_index, mentions=mentions, relation_pairs=pairs, relation_types=kinds,
        relation_evidence=evidence, synonyms=synonyms, entity_ids=list(entities["entity_id"]))
    graph.load_seconds = time.perf_counter() - started
    return graph


class GraphCache:
    """The current snapshot per chunking strategy of one graph store. The store's graph version is read at most
    once every ``version_seconds`` (0: on every use), and at once after this process stamped a new version
    itself (a sync here pushes it: ``store.local_writes()``); a changed version rebuilds the snapshot (loads
    are serialised). The result cache keys graph results with the same :meth:`version`, so the two never
    disagree.

    Once a version is held, a query never waits for the next read: when the held one is older than
    ``version_seconds``, the query answers from it and a read starts behind it, on a thread of its own, for the
    queries after it (a change another process made is seen within ``version_seconds`` plus one read). A
    version read costs 10 ms on a warm Neo4j and 30-80 ms on one idle for the interval (2 s), so waiting for it
    put every ~2 s's query in the tail. The query waits only when nothing is held yet, after a sync in this
    process, or with ``version_seconds`` 0.

    One thread at a time reads a version; while it does, the others answer from the version they hold. A read
    that fails (the store stopped answering: it fails after the driver's timeouts) keeps the held version for
    ``version_seconds`` more and is reported by :meth:`unanswered`, and graph queries go on from the snapshot
    they have."""

    def __init__(self, store: Any, version_seconds: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.version_seconds = version_seconds
        self._clock = clock
        self._graphs: dict[str, RetrievalGraph] = {}
        self._versions: dict[str, tuple[float, Any, Any]] = {}  # strategy -> (read at, local writes then, version)
        self._unanswered: dict[str, str] = {}  # strategy -> why its last version read failed
        self._lock = threading.Lock()
        self._reading = threading.Lock()

    def _local_writes(self) -> Any:
        local_writes = getattr(self.store, "local_writes", None)
        return local_writes() if local_writes is not None else None

    def _fresh(self, strategy: str, now: float, writes: Any) -> tuple[float, Any, Any] | None:
        held = self._versions.get(strategy)
        if held is not None and held[1] == writes and now - held[0] < self.version_seconds:
            return held
        return None

    def version(self, strategy: str) -> Any:
        """The graph version of ``strategy``: the held one while it is fresh; when it is stale, the held one
        still, with a read started behind this query; read from the store now when nothing is held, after a
        sync in this process, or with ``version_seconds`` 0."""
        now, writes = self._clock(), self._local_writes()
        fresh = self._fresh(strategy, now, writes)
        if fresh is not None:
            return fresh[2]
        held = self._versions.get(strategy)
        if held is not None and held[1] == writes and self.version_seconds > 0:
            self._read_behind(strategy, now, writes, held)
            return held[2]
        if not self._reading.acquire(blocking=held is None):  # nothing held yet: wait for the reading thread
            assert held is not None
            return held[2]  # another thread is reading it
        try:
            fresh = self._fresh(strategy, now, writes)  # read by the thread this one waited for
            if fresh is not None:
                return fresh[2]
            return self._read(strategy, now, writes, held)
        finally:
            self._reading.release()

    def _read_behind(self, strategy: str, now: float, writes: Any, held: tuple[float, Any, Any]) -> None:
        """Read the version on a thread of its own, unless a read is in flight already."""
        if not self._reading.acquire(blocking=False):
            return

        def read() -> None:
            try:
                self._read(strategy, now, writes, held)
            except Exception:  # nobody waits on this thread: the held version stays, and the log says why
                log.exception("graph version read of %r failed; the held graph answers", strategy)
            finally:
                self._reading.release()

        threading.Thread(target=read, name="ragloom-graph-version", daemon=True).start()

    def _read(self, strategy: str, now: float, writes: Any, held: tuple[float, Any, Any] | None) -> Any:
        """Read the version from the store (the caller holds ``_reading``). A failure with a version held keeps
        it for ``version_seconds`` more, recorded for :meth:`unanswered`; with nothing held, it raises."""
        try:
            version = self.store.graph_version(strategy)
        except RagloomError as e:
            if held is None:
                raise
            self._unanswered[strategy] = str(e)
            log.warning("graph version read failed; the held graph of %r answers for %.1f s more: %s",
                        strategy, self.version_seconds, e)
            self._versions[strategy] = (self._clock(), writes, held[2])  # asked again after version_seconds
            return held[2]
        self._unanswered.pop(strategy, None)
        self._versions[strategy] = (now, writes, version)
        return version

    def unanswered(self, strategy: str) -> str:
        """Why the last version read of ``strategy`` failed, while its held version answers instead ('' if none)."""
        return self._unanswered.get(strategy, "")

    def invalidate(self) -> None:
        """Read every version from the store at the next use (a change this process did not stamp itself)."""
        self._versions.clear()

    def get(self, strategy: str) -> RetrievalGraph:
        version = self.version(strategy)
        graph = self._graphs.get(strategy)
        if graph is not None and graph.version == version:
            return graph
        with self._lock:
            graph = self._graphs.get(strategy)
            if graph is not None and graph.version == version:
                return graph
            started = time.perf_counter()
            rows = self.store.retrieval_graph_rows(strategy)
            graph = build_graph(rows, version)
            graph.load_seconds = time.perf_counter() - started
            self._graphs[strategy] = graph
            return graph

    def name_vectors(self, graph: RetrievalGraph, model: str) -> None:
        """Load ``graph``'s entity name embeddings from ``model`` once (on first use: only queries matching names
        by embedding need them; they cost 4 bytes x dimension per entity)."""
        if graph.has_name_vectors(model):
            return
        with self._lock:
            if not graph.has_name_vectors(model):
                ids, vectors = self.store.retrieval_name_vectors(model)
                graph.set_name_vectors(model, ids, vectors)


def snapshot_cache(context: Any, store: Any) -> GraphCache:
    """The snapshot cache of ``store`` in a retrieval context (one per store; its version throttle is the
    context's ``graph_version_seconds``)."""
    key = ("graph_index", id(store))
    cache = context.cache.get(key)
    if cache is None:
        cache = context.cache.setdefault(key, GraphCache(store, getattr(context, "graph_version_seconds", 0.0)))
    return cache
