"""The in-process retrieval graph of one (namespace, chunking strategy): chunks and entities as one sparse
matrix for Personalized PageRank, built from the Neo4j graph and rebuilt when its version changes.

Nodes ``0 .. n_chunks - 1`` are chunks, ``n_chunks ..`` are entities. Edges (symmetric):
chunk–entity for every MENTIONS (weight: mention count), entity–entity for every RELATED_TO (weight: its
evidence weight × a factor per kind: subject-verb-object relations above co-occurrence), and entity–entity
SYNONYM edges when the graph has them. Relation evidence is kept per chunk, so a query that may read only
some scopes walks only the edges its readable chunks support (``walk_matrix``).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ragloom.retrieval import ppr

COOCCURS = "CO_OCCURS"
MATRIX_CACHE = 8  # walk matrices kept per graph (one per visible-scope set and edge weighting)


@dataclass(frozen=True)
class EdgeWeights:
    """Factors on each kind of entity–entity edge (MENTIONS edges weigh their mention count)."""

    svo: float = 2.0
    cooccurrence: float = 0.5
    synonym: float = 1.0
    synonym_min_score: float = 0.0  # synonym edges below this similarity are left out


@dataclass
class Walk:
    """What one query walks: P^T and the dangling mask of the visible graph, and which nodes are visible."""

    transposed: sp.csr_matrix
    dangling: np.ndarray
    visible_chunks: np.ndarray  # bool per chunk
    visible_entities: np.ndarray  # bool per entity


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
    _chunk_index: dict[str, int] = field(default_factory=dict, repr=False)
    _walks: OrderedDict[Any, Walk] = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self._chunk_index = {c: i for i, c in enumerate(self.chunk_ids)}
        self.word_index: dict[str, list[int]] = {}  # word of a normalised name -> entity indexes
        for norm, entities in self.norm_index.items():
            for word in set(norm.split()):
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

    def visible_chunks(self, scope_paths: Sequence[str] | None) -> np.ndarray:
        if scope_paths is None:
            return np.ones(self.n_chunks, dtype=bool)
        codes = [i for i, s in enumerate(self.scopes) if s in set(scope_paths)]
        return np.isin(self.chunk_scope, codes)

    def walk_matrix(self, scope_paths: Sequence[str] | None, weights: EdgeWeights = EdgeWeights()) -> Walk:
        """The walk over what ``scope_paths`` may read (None: everything), cached per visible set."""
        visible = self.visible_chunks(scope_paths)
        key = (tuple(sorted(i for i, s in enumerate(self.scopes) if scope_paths is None or s in set(scope_paths))),
               weights)
        with self._lock:
            walk = self._walks.get(key)
            if walk is not None:
                self._walks.move_to_end(key)
                return walk
        walk = self._build_walk(visible, weights)
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
        w = evidence * factor if len(factor) else evidence
        pairs = self.relation_pairs
        n = self.n_entities
        relations = sp.csr_matrix((w, (pairs[:, 0], pairs[:, 1])), shape=(n, n)) if len(w) else sp.csr_matrix((n, n))
        synonyms = self.synonyms.copy()
        synonyms.data[synonyms.data < weights.synonym_min_score] = 0.0
        entity_edges = relations + relations.T + weights.synonym * (synonyms + synonyms.T)
        entity_edges.setdiag(0)
        adjacency = sp.bmat([[None, mentions], [mentions.T, entity_edges]], format="csr")
        node_visible = np.concatenate([visible, visible_entities])
        transposed, dangling = ppr.transition(adjacency, node_visible)
        return Walk(transposed, dangling, visible, visible_entities)

    def memory_bytes(self) -> int:
        """Bytes held by the arrays and matrices (names and ids counted by their string sizes)."""
        arrays = [self.chunk_scope, self.relation_pairs, self.chunk_frequency]
        total = sum(a.nbytes for a in arrays)
        for m in (self.mentions, self.mentions_t, self.relation_evidence, self.synonyms):
            total += m.data.nbytes + m.indices.nbytes + m.indptr.nbytes
        for walk in list(self._walks.values()):
            t = walk.transposed
            total += t.data.nbytes + t.indices.nbytes + t.indptr.nbytes + walk.dangling.nbytes
        return total


def build_graph(rows: Mapping[str, list[dict[str, Any]]], version: Any = None,
                normalize: Callable[[str], str] | None = None) -> RetrievalGraph:
    """A snapshot from the store's rows: ``chunks`` [{chunk_id, scope_path, entity_ids, counts}], ``entities``
    [{entity_id, name, type, norm, alias_norms}], ``relations`` [{source, target, type, chunk_ids,
    chunk_weights}] and optionally ``synonyms`` [{source, target, score}]. Relations and synonyms naming an
    unknown entity, and evidence from chunks outside ``chunks`` (another strategy's), are ignored."""
    started = time.perf_counter()
    entities = rows.get("entities", [])
    entity_index = {e["entity_id"]: i for i, e in enumerate(entities)}
    names = [e.get("name") or "" for e in entities]
    types = [e.get("type") or "" for e in entities]
    norm_index: dict[str, list[int]] = {}
    for i, e in enumerate(entities):
        keys = [e.get("norm") or (normalize(names[i]) if normalize else names[i].casefold())]
        keys += list(e.get("alias_norms") or [])
        for key in dict.fromkeys(k for k in keys if k):
            norm_index.setdefault(key, []).append(i)

    chunks = rows.get("chunks", [])
    chunk_ids = [c["chunk_id"] for c in chunks]
    chunk_index = {c: i for i, c in enumerate(chunk_ids)}
    scopes: dict[str, int] = {}
    chunk_scope = np.array([scopes.setdefault(c.get("scope_path") or "", len(scopes)) for c in chunks], dtype=np.int32)
    m_rows, m_cols, m_vals = [], [], []
    for i, c in enumerate(chunks):
        for entity_id, count in zip(c.get("entity_ids") or (), c.get("counts") or (), strict=False):
            j = entity_index.get(entity_id)
            if j is not None:
                m_rows.append(i)
                m_cols.append(j)
                m_vals.append(float(count or 1))
    mentions = sp.csr_matrix((np.array(m_vals, dtype=np.float32), (np.array(m_rows, dtype=np.int32),
                              np.array(m_cols, dtype=np.int32))), shape=(len(chunks), len(entities)))
    mentions.sum_duplicates()

    pairs, kinds, e_rows, e_cols, e_vals = [], [], [], [], []
    for r in rows.get("relations", []):
        a, b = entity_index.get(r["source"]), entity_index.get(r["target"])
        if a is None or b is None or a == b:
            continue
        support = [(chunk_index[c], float(w)) for c, w in zip(r.get("chunk_ids") or (), r.get("chunk_weights") or (),
                                                              strict=False) if c in chunk_index]
        if not support:
            continue
        k = len(pairs)
        pairs.append((a, b))
        kinds.append(r.get("type") or COOCCURS)
        for chunk, weight in support:
            e_rows.append(k)
            e_cols.append(chunk)
            e_vals.append(weight)
    evidence = sp.csr_matrix((np.array(e_vals, dtype=np.float32), (np.array(e_rows, dtype=np.int32),
                              np.array(e_cols, dtype=np.int32))), shape=(len(pairs), len(chunks)))
    s_rows, s_cols, s_vals = [], [], []
    for s in rows.get("synonyms", []):
        a, b = entity_index.get(s["source"]), entity_index.get(s["target"])
        if a is not None and b is not None and a != b:
            s_rows.append(a)
            s_cols.append(b)
            s_vals.append(float(s.get("score") or 1.0))
    n = len(entities)
    synonyms = sp.csr_matrix((np.array(s_vals, dtype=np.float32), (np.array(s_rows, dtype=np.int32),
                              np.array(s_cols, dtype=np.int32))), shape=(n, n))
    graph = RetrievalGraph(
        version=version, chunk_ids=chunk_ids, chunk_scope=chunk_scope, scopes=list(scopes), entity_names=names,
        entity_types=types, norm_index=norm_index, mentions=mentions,
        relation_pairs=np.array(pairs, dtype=np.int32).reshape(-1, 2), relation_types=kinds,
        relation_evidence=evidence, synonyms=synonyms)
    graph.load_seconds = time.perf_counter() - started
    return graph


class GraphCache:
    """The current snapshot per chunking strategy of one graph store: the store's graph version is read on
    every use and a changed version rebuilds the snapshot (loads are serialised; readers keep the old one
    until the new one is ready)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._graphs: dict[str, RetrievalGraph] = {}
        self._lock = threading.Lock()

    def get(self, strategy: str) -> RetrievalGraph:
        version = self.store.graph_version(strategy)
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
