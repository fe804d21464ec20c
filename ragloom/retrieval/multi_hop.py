"""multi_hop: iterative retrieval without a language model. Retrieve; take the entities the best results name
and the query does not (bridge entities); retrieve again for the query with each bridge; fuse every round."""

from __future__ import annotations

import dataclasses
from typing import Any

from ragloom.errors import RagloomError
from ragloom.retrieval import fusion, lanes
from ragloom.retrieval.base import Retriever, SearchRequest, register_retrieval_strategy
from ragloom.retrieval.graph_rag import graph_snapshot, query_names
from ragloom.retrieval.options import Option
from ragloom.types import RetrievedItem


@register_retrieval_strategy("multi_hop")
class MultiHopRetriever(Retriever):
    """Round 1 is the ``lane`` (hybrid by default). Each later round takes the entities that the
    ``bridge_chunks`` best results so far mention and the query does not name, most specific first (fewest
    chunks mentioning them; entities of better-ranked chunks first), and runs the lane again for
    ``"<bridge> <query>"`` for each of ``bridges`` of them. All rounds' lists are fused by RRF, the first
    round weighted ``first_weight``. Entities come from the in-process graph (graph_rag's); without a graph
    store the first round answers and ``metadata["fallbacks"]`` says why.
    """

    summary = "iterative retrieval: re-query with the entities the best results name and the query does not"

    needs_graph = True
    declared_options: dict[str, Option] = {
        "max_rounds": Option(2, min=1, max=5, help="retrieval rounds (1 = the lane alone)"),
        "bridge_chunks": Option(3, min=1, max=50, help="best results whose entities are bridge candidates"),
        "bridges": Option(3, min=1, max=50, help="bridge entities re-queried per round"),
        "first_weight": Option(2.0, min=0.0, help="RRF weight of the first round (each later query weighs 1)"),
        "lane": Option("hybrid", choices=lanes.LANES, help="the lane every round runs"),
        "alpha": Option(0.5, min=0.0, max=1.0, help="lane=hybrid: 0 = BM25 only, 1 = vector only"),
        "fusion_type": Option("relative_score", choices=lanes.HYBRID_FUSION_TYPES,
                              help="lane=hybrid: how Weaviate fuses its BM25 and vector scores"),
        "rrf_k": Option(fusion.DEFAULT_RRF_K, min=0, help="the k in weight / (rrf_k + rank) fusing the rounds"),
        "lane_multiplier": Option(3, min=1, max=50, help="each query fetches k x this many candidates"),
    }

    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        per_lane = request.fetch_k * options["lane_multiplier"]

        def lane(req: SearchRequest) -> list[RetrievedItem]:
            return lanes.run(options["lane"], req, self.chunking, per_lane, alpha=options["alpha"],
                             fusion_type=options["fusion_type"])

        ranked = {"round 1": lane(request)}
        weights = {"round 1": options["first_weight"]}
        if options["max_rounds"] == 1:
            return ranked["round 1"][: request.fetch_k]
        store, why = self.context.graph()
        try:
            graph = graph_snapshot(self.context, store, self.chunking) if store is not None else None
        except RagloomError as e:
            graph, why = None, f"graph store failed: {e}"
        if graph is None:
            request.fallbacks.append(f"multi_hop->{options['lane']}: {why}")
            return ranked["round 1"][: request.fetch_k]
        visible = graph.walk_matrix(request.scope.visible_paths()).visible_entities
        with request.stage("bridges"):
            names, grams = query_names(self.context, request)
            used = set(graph.match_names([*names, *grams], partial_limit=0))
        fused = ranked["round 1"]
        rounds: list[list[str]] = []
        for round_no in range(2, options["max_rounds"] + 1):
            with request.stage("bridges"):
                bridges = self._bridges(graph, fused[: options["bridge_chunks"]], used, visible, options["bridges"])
            if not bridges:
                break
            used.update(bridges)
            names = [graph.entity_names[e] for e in bridges]
            rounds.append(names)
            for name in names:
                sub = dataclasses.replace(request, query=f"{name} {request.query}", _vector=None, lanes_run=[],
                                          fallbacks=[], timings_ms={}, info={})
                key = f"round {round_no}: {name}"
                ranked[key] = lane(sub)
                for stage, ms in sub.timings_ms.items():
                    request.timings_ms[stage] = request.timings_ms.get(stage, 0.0) + ms
            with request.stage("fusion"):
                fused = fusion.rrf(ranked, k=per_lane, rrf_k=options["rrf_k"], weights=weights)
        request.info["multi_hop"] = {"rounds": 1 + len(rounds), "bridges": rounds}
        return fused[: request.fetch_k]

    @staticmethod
    def _bridges(graph: Any, top: list[RetrievedItem], used: set[int], visible: Any, limit: int) -> list[int]:
        """Readable entities of the top chunks not used yet, per chunk in rank order, most specific first."""
        out: list[int] = []
        for item in top:
            node = graph.chunk_node(item.chunk_id)
            if node is None:
                continue
            candidates = [int(e) for e in graph.entities_of(node) if visible[e] and int(e) not in used]
            candidates.sort(key=lambda e: (graph.chunk_frequency[e], e))
            for entity in candidates:
                if entity not in out:
                    out.append(entity)
                if len(out) >= limit:
                    return out
        return out
