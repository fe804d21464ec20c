"""graph_rag: Personalized PageRank over the chunk–entity graph, seeded by the query's entities, the entities
of the best hybrid hits and (lightly) every hybrid candidate; chunks ranked by the walk's probability mass,
after a context item explaining them (ragloom.retrieval.graph_context)."""

from __future__ import annotations

import dataclasses
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from ragloom.errors import RagloomError, RetrievalError, StoreError
from ragloom.options import Option
from ragloom.retrieval import entity_match, fusion, graph_context, lanes, ppr, walk_gate
from ragloom.retrieval.base import Retriever, SearchRequest, register_retrieval_strategy, store_call
from ragloom.retrieval.graph_index import EdgeWeights, GraphCache, RetrievalGraph, Walk, relation_filter, snapshot_cache
from ragloom.stores.base import GraphStore
from ragloom.types import RetrievedItem

log = logging.getLogger(__name__)



@register_retrieval_strategy("graph_rag")
class GraphRagRetriever(Retriever):
    """(1) the ``vector_lane`` (hybrid by default) fetches ``candidates`` chunks; (2) seeds: entities the query
    names (spaCy's names and word n-grams matched to graph entities by normalised name) and the entities of the
    ``seed_chunks`` best candidates, each weighted by its score ÷ the number of chunks mentioning it (the
    ``max_seeds`` heaviest kept), plus every candidate chunk at its min-max normalised score ×
    ``passage_weight``; (3) Personalized PageRank (``damping`` = probability of following an edge) over the
    in-process graph of the chunking strategy, restricted to the scopes the query may read, to the edges
    ``relations`` names and (``max_hops``) to the neighbourhood of the seeds; (4) chunks ranked by mass, after a
    context item (``metadata["source"] == "graph_rag"``, rank 0) giving the relations on the walk's most probable
    paths from the query's entities to the returned chunks, each citing a readable chunk, in ``context_format``.

    No graph store, an unreadable graph, or no seed entity: the vector lane's own ranking answers, and
    ``metadata["fallbacks"]`` says why.

    The lane asks for its candidates' ids and scores only; the chunks the answer returns are read whole by one
    fetch at the end (``lane_read``), so the ~30 candidates that are never shown cost neither Weaviate nor the
    client their text, properties and vectors. That fetch reads the first k when they are all post-processing
    keeps (``SearchRequest.enough``: none of them a near-duplicate of another), else every placed chunk. Under
    the scope alone (no user filter or visibility node) the walk's chunks are read in that same fetch, so a
    query makes two store calls; with a filter the graph cannot see, they are fetched under it before they are
    placed (``fetch``), as they are when the final read misses a chunk the graph still holds.
    """

    summary = "Personalized PageRank over the chunk-entity graph, seeded by the query's entities and a vector lane"

    needs_graph = True
    declared_options: dict[str, Option] = {
        "candidates": Option(50, min=1, max=1000,
                             help="chunks the vector lane fetches: the passage seeds, and the answer on a fallback"),
        "passage_weight": Option(0.05, min=0.0, max=10.0,
                                 help="reset weight of the best candidate chunk (min-max scaled; entity seeds <= 1)"),
        "damping": Option(0.5, min=0.0, max=0.99, help="probability of following an edge (1 - damping restarts)"),
        "seed_chunks": Option(5, min=0, max=1000, help="best candidates whose entities seed the walk"),
        "max_seeds": Option(10, min=0, max=1000, help="entity seeds kept, heaviest (score / chunk frequency) first"),
        "query_entities": Option(True, help="seed the entities the query names"),
        "name_similarity": Option(0.0, min=0.0, max=1.0,
                                  help="a query name no entity has exactly seeds the entity whose name embeds closest, "
                                       "at this cosine or more (0 = exact names only)"),
        "require_named": Option(False, help="walk only when the query names a graph entity; else the vector "
                                            "lane answers (off: the best candidates' entities seed the walk)"),
        "max_named": Option(1000, min=0, max=1000,
                            help="the vector lane's order answers a query naming more graph entities than this "
                                 "(seeds that many spread the walk thin; 1000: no bound)"),
        "min_overlap": Option(0.0, min=0.0, max=1.0,
                              help="the vector lane's order answers unless at least this share of the walk's first "
                                   "10 chunks are in the lane's first 10 (a walk that re-ranks, not one that "
                                   "drifts); 0 = not checked"),
        "min_average_overlap": Option(0.55, min=0.0, max=1.0,
                                      help="the vector lane's order answers unless the walk's first d chunks share "
                                           "at least this much with the lane's first d, averaged over d = 1..10 "
                                           "(one chunk moving changes it a little, where min_overlap flips); "
                                           "0 = not checked"),
        "lane_weight": Option(0.0, min=0.0, max=10.0,
                              help="RRF weight of the vector lane's own ranking fused with the walk's (0 = walk only)"),
        "lane_head": Option(3, min=0, max=1000,
                            help="the vector lane's first n chunks lead the answer, in its order; "
                                 "the walk ranks the rest"),
        "walk_slots": Option(1000, min=0, max=1000,
                             help="after the lane's head the walk places at most this many chunks, then the lane's "
                                  "order resumes (1000: the walk ranks everything after the head)"),
        "svo_weight": Option(2.0, min=0.0, max=100.0, help="edge factor of subject-verb-object relations"),
        "cooccurrence_weight": Option(0.5, min=0.0, max=100.0, help="edge factor of same-sentence co-occurrence"),
        "synonym_weight": Option(1.0, min=0.0, max=100.0, help="edge factor of synonym edges (x similarity)"),
        "synonym_min_score": Option(0.0, min=0.0, max=1.0,
                                    help="synonym edges under this name cosine are not walked (stored: >= the "
                                         "ingest threshold)"),
        "max_iter": Option(10, min=1, max=1000,
                           help="power iterations at most (one sparse mat-vec each; 8-30 rank MuSiQue alike)"),
        "vector_lane": Option("hybrid", choices=("dense", "hybrid"), help="the lane that seeds the passages"),
        "alpha": lanes.ALPHA,
        "fusion_type": lanes.FUSION_TYPE,
        "max_hops": Option(None, kind=int, min=1, max=20,
                           help="no mass leaves the nodes this many edges from a seed (an entity or a passage "
                                "seed; entity to chunk is one edge, entity to entity one); null = no bound"),
        "relations": Option((), of=str, max_items=100,
                            help="edges walked: families svo, co_occurs, synonym and single SVO predicates as the "
                                 "extractor spells them (verb lemma: LEAD, BUILD, OWN, FOUNDER_OF); empty = every "
                                 "edge; metadata graph.unknown_relations names predicates the graph lacks"),
        "graph_context": Option(True, help="prepend a context item (rank 0): the relations linking the query's "
                                           "entities to the returned chunks"),
        "context_edges": Option(30, min=0, max=1000, help="edges written into the context item at most"),
        "context_format": Option("text", choices=graph_context.context_formats,
                                 help="how the context item is written: text triples, json, or a serializer "
                                      "registered with register_context_serializer"),
    }

    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        lane_name = options["vector_lane"]
        try:
            request.vector()  # embed once, before the lanes split
        except RagloomError as e:  # the embedder failing: BM25 seeds the passages instead
            request.fallbacks.append(f"graph_rag: lane {lane_name} failed, bm25 seeds the walk: "
                                     f"{request.context.error_text(e)}")
            lane_name = "bm25"
        # The lane waits on Weaviate while spaCy and the graph work here: run it alongside.
        lane = _lane_pool().submit(lanes.run, lane_name, request, self.chunking,
                                   max(options["candidates"], request.fetch_k), alpha=options["alpha"],
                                   fusion_type=options["fusion_type"], ids_only=True)
        store, why = self.context.graph()
        if store is None:
            return _fallback(request, lane, why)
        try:
            with request.stage("graph_load"):
                graph = graph_snapshot(self.context, store, self.chunking, request)
                weights = EdgeWeights(svo=options["svo_weight"], cooccurrence=options["cooccurrence_weight"],
                                      synonym=options["synonym_weight"],
                                      synonym_min_score=options["synonym_min_score"],
                                      relations=tuple(options["relations"]))
                walk = graph.walk_matrix(request.scope.visible_paths(), weights)
        except RagloomError as e:  # Neo4j failing mid-query: answer from the vectors, and say so
            return _fallback(request, lane, f"graph store failed: {request.context.error_text(e)}")
        named = self._named_entities(request, store, graph, walk, options["name_similarity"]) \
            if options["query_entities"] else []
        if options["require_named"] and not named:
            return _fallback(request, lane, "the query names no entity of the graph")
        try:
            candidates = lane.result()
        except RagloomError as e:  # the walk answers alone, from the entities the query names
            if not named:  # nothing to walk from either: _fallback reports both failures
                return _fallback(request, lane, "the query names no entity of the graph")
            request.fallbacks.append(f"graph_rag: lane {lane_name} failed, the walk answers alone: "
                                     f"{request.context.error_text(e)}")
            candidates = []
        with request.stage("graph_seeds"):
            nodes = [graph.chunk_node(item.chunk_id) for item in candidates]
            scored = {n: float(item.score) for n, item in zip(nodes, candidates, strict=True)
                      if n is not None and walk.visible_chunks[n]}
            normalised = dict(zip(scored, ppr.min_max(scored.values()), strict=True))
            top = sorted(scored, key=lambda n: -scored[n])[: options["seed_chunks"]]
            entities = ppr.entity_seeds(named, {n: graph.entities_of(n) for n in top}, normalised,
                                        graph.chunk_frequency, max_seeds=options["max_seeds"])
        if not entities:
            return _fallback(request, lane, "no seed entities in the graph for this query")
        with request.stage("ppr"):
            reset = np.zeros(graph.n_chunks + graph.n_entities)
            for node, weight in ppr.passage_seeds(scored, options["passage_weight"]).items():
                reset[node] = weight
            for entity, weight in entities.items():
                reset[graph.n_chunks + entity] = weight
            mass = ppr.bounded_pagerank(walk.transposed, walk.dangling, reset, max_hops=options["max_hops"],
                                        damping=options["damping"], max_iter=options["max_iter"])
        # With the scope as the store's only filter, every chunk the walk can see is one the store returns, so the
        # walk's chunks are read whole with the lane's at the end (one fetch); a chunk the graph still holds but the
        # store no longer does (a delete the graph has not seen yet) sends the query down the checked path.
        checked = not request.scope_only()
        items, walked, signals, unread = self._placed(request, graph, walk, mass, candidates, options, len(named),
                                                      checked)
        lane_ids = {item.chunk_id for item in candidates}
        read, tried = _read_whole(request, items, lane_ids | unread)
        gone = _gone(items[:tried], read)
        if unread & gone:
            items, walked, signals, _ = self._placed(request, graph, walk, mass, candidates, options, len(named),
                                                     checked=True)
            read, tried = _read_whole(request, items, lane_ids)
            gone = _gone(items[:tried], read)
        # the context explains every placed chunk but those the read found gone, read or not
        placed = [item.chunk_id for item in items if item.chunk_id not in gone]
        items = read
        if walked:
            request.lane("graph")
        request.info["graph"] = {
            "seeds": [graph.entity_names[e] for e in entities], "named_in_query": len(named),
            "passage_seeds": len(scored), "chunks": graph.n_chunks, "entities": graph.n_entities,
            "graph_version": str(graph.version), "walked": walked, "signals": dataclasses.asdict(signals)}
        if options["relations"]:  # a predicate the graph never states filters everything out of that kind: say so
            _, predicates = relation_filter(options["relations"])
            missing = sorted(predicates - set(graph.relation_types))
            if missing:
                request.info["graph"]["unknown_relations"] = missing
        if options["graph_context"]:
            with request.stage("graph_context"):
                explanation = graph_context.explain(graph, walk, mass, named or list(entities), placed,
                                                    options["context_edges"])
            if explanation is not None:
                return [graph_context.context_item(explanation, options["context_format"]), *items]
        return items

    def _placed(self, request: SearchRequest, graph: RetrievalGraph, walk: Walk, mass: np.ndarray,
                candidates: list[RetrievedItem], options: dict[str, Any], named: int, checked: bool
                ) -> tuple[list[RetrievedItem], bool, walk_gate.WalkSignals, set[str]]:
        """The answer's order before its final read: the walk's ranking, gated and combined with the lane's.
        Returns (items, walked, the gate's signals, the ids of the walk's chunks placed by id alone)."""
        items, unread = self._ranked(request, graph, walk, mass, candidates, checked)
        signals = walk_gate.walk_signals(named, [c.score for c in candidates], [c.chunk_id for c in candidates],
                                         [i.chunk_id for i in items], [i.score for i in items])
        # with no lane to fall back to (it failed), the walk answers whatever its signals say
        walked = not candidates or walk_gate.should_walk(signals, gate_thresholds(options))
        if not walked:  # the walk ran, but its signals say it would not help: the lane's order answers
            return candidates[: request.fetch_k], walked, signals, unread
        if options["lane_weight"] > 0:
            with request.stage("fusion"):
                items = fusion.rrf({"graph": items, "lane": candidates}, k=request.fetch_k,
                                   weights={"lane": options["lane_weight"]})
        items = walk_gate.combine(candidates, items, options["lane_head"], options["walk_slots"], request.fetch_k,
                                  key=lambda item: item.chunk_id)
        return items, walked, signals, unread

    def _named_entities(self, request: SearchRequest, store: GraphStore, graph: RetrievalGraph, walk: Walk,
                        min_similarity: float = 0.0) -> list[int]:
        with request.stage("graph_seeds"):
            if min_similarity <= 0:  # the dictionary pass, NER only where it can add (entity_match)
                found, ran_ner = entity_match.match_query(graph, request.query, _query_nlp(self.context, request))
                request.info["query_ner"] = ran_ner
                return [e for e in found if walk.visible_entities[e]]
            names, grams = query_names(self.context, request)
            # only spaCy's names may match partially: a word n-gram such as "first goal" would match noise
            found = dict.fromkeys([*graph.match_names(names), *graph.match_names(grams, partial_limit=0)])
            unmatched = [n for n in names if not graph.match_names([n])]
            if unmatched:
                embedder = self.context.embedder
                graph_snapshot_cache(self.context, store).name_vectors(graph, embedder.model_id)
                vectors = np.asarray(embedder.encode(unmatched), dtype=np.float32)
                vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
                found.update(dict.fromkeys(graph.similar_names(embedder.model_id, vectors, min_similarity)))
            return [e for e in found if walk.visible_entities[e]]

    def _ranked(self, request: SearchRequest, graph: RetrievalGraph, walk: Walk, mass: np.ndarray,
                candidates: list[RetrievedItem], checked: bool) -> tuple[list[RetrievedItem], set[str]]:
        """Readable chunks by mass, and the ids of the chunks placed by id alone (none when ``checked``).
        ``checked``: chunks the lane did not return are fetched whole under the query's filters first (those the
        filters leave out are skipped); otherwise they are placed by id alone, for the final read."""
        chunk_mass = np.where(walk.visible_chunks, mass[: graph.n_chunks], 0.0)
        want = request.fetch_k
        order = np.argsort(-chunk_mass, kind="stable")[: want * 2]
        ranked_ids = [graph.chunk_ids[n] for n in order if chunk_mass[n] > 0]
        by_id = {item.chunk_id: item for item in candidates}
        missing = [c for c in ranked_ids if c not in by_id]
        unread: set[str] = set()
        if missing and checked:
            where = request.where()
            fetched = store_call(request, "fetch", lambda: self.context.vectors.fetch(
                self.chunking, missing, where=where, include_vectors=request.include_vectors))
            by_id.update({item.chunk_id: item for item in fetched})
        elif missing:
            by_id.update({c: RetrievedItem(chunk_id=c, document_id="", text="", score=0.0) for c in missing})
            unread = set(missing)
        out: list[RetrievedItem] = []
        for chunk_id in ranked_ids:
            item = by_id.get(chunk_id)
            if item is None:  # filtered out by the user's filters (or gone from Weaviate)
                continue
            node = graph.chunk_node(chunk_id)
            item = dataclasses.replace(item, lane_scores=dict(item.lane_scores))  # the lane's items stay as they are
            item.score = float(chunk_mass[node])
            item.lane_scores["graph"] = item.score
            out.append(item)
            if len(out) >= want:
                break
        else:
            taken = {item.chunk_id for item in out}
            out.extend(item for item in candidates if item.chunk_id not in taken)  # chunks the graph does not hold
        return out[:want], unread


def gate_thresholds(options: dict[str, Any]) -> walk_gate.GateThresholds:
    """The walk's gate from the declared options (ragloom.retrieval.walk_gate)."""
    return walk_gate.GateThresholds(min_named=1 if options["require_named"] else 0, max_named=options["max_named"],
                                    min_overlap=options["min_overlap"],
                                    min_average_overlap=options["min_average_overlap"])


def _query_nlp(context: Any, request: SearchRequest) -> Any:
    """The spaCy pipeline, or None (said in the fallbacks): without spaCy the n-grams still find names."""
    try:
        return context.nlp
    except RagloomError as e:
        request.fallbacks.append(f"entity names: spaCy unavailable ({request.context.error_text(e)}); "
                                 "word n-grams only")
        return None


def query_names(context: Any, request: SearchRequest) -> tuple[list[str], list[str]]:
    """Normalised names the query may mention: (spaCy's entity names, every word n-gram with single stop
    words and words under 3 letters left out), to match against the graph's normalised names and aliases."""
    nlp = _query_nlp(context, request)
    if nlp is None:
        return [], entity_match.query_grams(request.query)
    names = entity_match.ner_names(nlp, request.query)
    grams = entity_match.query_grams(request.query, nlp.Defaults.stop_words)
    return list(dict.fromkeys(n for n in names if n)), grams


def graph_snapshot_cache(context: Any, store: Any) -> GraphCache:
    return snapshot_cache(context, store)


def graph_snapshot(context: Any, store: Any, chunking: str, request: SearchRequest | None = None) -> RetrievalGraph:
    """The current in-process graph of ``chunking`` for this context's graph store (reloaded on a new version).
    When the store did not answer the version read, the graph held answers, and ``request``'s fallbacks say so."""
    cache = graph_snapshot_cache(context, store)
    graph = cache.get(chunking)
    unanswered = cache.unanswered(chunking)
    if unanswered and request is not None:
        # the store's own words are logged (GraphCache), not returned: they name hosts and namespaces
        request.fallbacks.append(f"graph: the graph store did not answer; the graph it last gave answers "
                                 f"(version {graph.version})")
    return graph


def _fallback(request: SearchRequest, lane: Future[list[RetrievedItem]], reason: str) -> list[RetrievedItem]:
    """The vector lane's own ranking (the lane already in flight is reused, never abandoned)."""
    try:
        items = lane.result()
    except RagloomError as e:
        kind = StoreError if isinstance(e, StoreError) else RetrievalError  # a store down is the server's fault
        raise kind(f"graph_rag: every lane failed: vector lane: {e}; graph: {reason}") from e
    request.fallbacks.append(f"graph_rag->hybrid: {reason}")
    log.debug("graph_rag falls back to its vector lane: %s", reason)  # normal for a query naming no entity
    return _read_whole(request, items[: request.fetch_k], {item.chunk_id for item in items})[0]


def _read_whole(request: SearchRequest, items: list[RetrievedItem], thin: set[str]
                ) -> tuple[list[RetrievedItem], int]:
    """The first ``items`` read whole, and how many of them were tried: the first k when they are
    ``request.enough`` for post-processing (they survive its de-duplication), else all of them (a second fetch:
    124 of 2,916 dev-set queries at k 10 and 30). See :func:`_read`."""
    if request.enough is not None and len(items) > request.k:
        head = _read(request, items[: request.k], thin)
        if request.enough(head):
            return head, request.k
        return head + _read(request, items[request.k:], thin), len(items)
    return _read(request, items, thin), len(items)


def _gone(tried: list[RetrievedItem], read: list[RetrievedItem]) -> set[str]:
    """Ids of the ``tried`` items the read did not return (gone from the store since they were placed)."""
    return {item.chunk_id for item in tried} - {item.chunk_id for item in read}


def _read(request: SearchRequest, items: list[RetrievedItem], thin: set[str]) -> list[RetrievedItem]:
    """``items`` with those the ids-only lane returned (chunk ids in ``thin``) read whole, by one fetch under the
    query's scope and filters; each keeps its score, lane scores and rank. A chunk deleted since the lane ran is
    left out, as a fetched chunk is."""
    wanted = [item.chunk_id for item in items if item.chunk_id in thin]
    if not wanted:
        return items
    where = request.where()
    fetched = store_call(request, "lane_read", lambda: request.context.vectors.fetch(
        request.chunking, wanted, where=where, include_vectors=request.include_vectors))
    whole = {item.chunk_id: item for item in fetched}
    out = []
    for item in items:
        if item.chunk_id in thin:
            if item.chunk_id not in whole:
                continue
            item = dataclasses.replace(whole[item.chunk_id], score=item.score, rank=item.rank,
                                       lane_scores=item.lane_scores)
        out.append(item)
    return out


# One thread per query in flight: the lane only waits on Weaviate, and a smaller pool queued the service's
# workers (RAGLOOM_SERVICE_WORKERS, 8 by default) behind each other's lanes. Threads start only as needed.
LANE_THREADS = 64
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _lane_pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:  # two first queries at once must not each make a pool
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=LANE_THREADS, thread_name_prefix="ragloom-vector-lane")
        return _POOL
