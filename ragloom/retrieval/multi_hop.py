"""multi_hop: iterative retrieval. Retrieve; take the entities the best results name and the query does not
(bridge entities); retrieve again for the query with each bridge; fuse every round. With a language model
configured, then up to ``max_hops`` follow-up queries the model writes from what was found so far."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ragloom.errors import RagloomError
from ragloom.llm.transforms import FollowUp
from ragloom.options import Option
from ragloom.retrieval import fusion, lanes
from ragloom.retrieval.base import Retriever, SearchRequest, register_retrieval_strategy
from ragloom.retrieval.graph_rag import graph_snapshot, query_names
from ragloom.types import RetrievedItem


@register_retrieval_strategy("multi_hop")
class MultiHopRetriever(Retriever):
    """Round 1 is the ``lane`` (hybrid by default). Each later round takes the entities that the
    ``bridge_chunks`` best results so far mention and the query does not name, most specific first (fewest
    chunks mentioning them; entities of better-ranked chunks first), and runs the lane again for
    ``"<bridge> <query>"`` for each of ``bridges`` of them. All rounds' lists are fused by RRF, the first
    round weighted ``first_weight``. Entities come from the in-process graph (graph_rag's); without a graph
    store the first round answers and ``metadata["fallbacks"]`` says why.

    With a language model (RAGLOOM_LLM_*) and ``max_hops`` > 0 (off by default: a model call per hop, and the
    local stack's model is a tiny base model), each hop then shows the model the question and
    the ``follow_up_chunks`` best results so far and asks for one query for what is still missing; that query
    runs the lane and joins the fusion (weight 1). Hops stop at an empty or repeated query; a model that fails
    ends them with a ``fallbacks`` entry. ``info["multi_hop"]["follow_ups"]`` records each query and its cost.
    Without a model the hops are off.
    """

    summary = "iterative retrieval: re-query with the entities the best results name and the query does not"

    needs_graph = True
    declared_options: dict[str, Option] = {
        "max_rounds": Option(2, min=1, max=5, help="retrieval rounds (1 = the lane alone)"),
        "bridge_chunks": Option(3, min=1, max=50, help="best results whose entities are bridge candidates"),
        "bridges": Option(3, min=1, max=50, help="bridge entities re-queried per round"),
        "first_weight": Option(2.0, min=0.0, max=100.0,
                               help="RRF weight of the first round (each later query weighs 1)"),
        "lane": Option("hybrid", choices=lanes.LANES, help="the lane every round runs"),
        "alpha": lanes.ALPHA,
        "fusion_type": lanes.FUSION_TYPE,
        "rrf_k": Option(fusion.DEFAULT_RRF_K, min=0, max=10_000,
                        help="the k in weight / (rrf_k + rank) fusing the rounds"),
        "lane_multiplier": Option(3, min=1, max=50, help="each query fetches k x this many candidates"),
        "max_hops": Option(0, min=0, max=5, help="with a language model configured: follow-up queries it writes "
                           "from the best results so far, after the bridge rounds; 0 = off (each hop is a model call)"),
        "follow_up_chunks": Option(3, min=1, max=20, help="best results so far shown to the model per hop"),
    }

    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        per_lane = request.fetch_k * options["lane_multiplier"]

        def lane(req: SearchRequest) -> list[RetrievedItem]:
            return lanes.run(options["lane"], req, self.chunking, per_lane, alpha=options["alpha"],
                             fusion_type=options["fusion_type"])

        ranked = {"round 1": lane(request)}
        weights = {"round 1": options["first_weight"]}
        if options["max_rounds"] == 1:
            return self._follow_ups(request, options, lane, ranked, weights, ranked["round 1"])[: request.fetch_k]
        store, why = self.context.graph()
        try:
            graph = graph_snapshot(self.context, store, self.chunking, request) if store is not None else None
        except RagloomError as e:
            graph, why = None, f"graph store failed: {request.context.error_text(e)}"
        if graph is None:
            request.fallbacks.append(f"multi_hop->{options['lane']}: {why}")
            return self._follow_ups(request, options, lane, ranked, weights, ranked["round 1"])[: request.fetch_k]
        walk = graph.walk_matrix(request.scope.visible_paths())
        with request.stage("bridges"):
            names, grams = query_names(self.context, request)
            used = set(graph.match_names([*names, *grams], partial_limit=0))
        fused = ranked["round 1"]
        rounds: list[list[str]] = []
        for round_no in range(2, options["max_rounds"] + 1):
            with request.stage("bridges"):
                bridges = self._bridges(graph, walk, fused[: options["bridge_chunks"]], fused[: request.fetch_k], used,
                                        options["bridges"])
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
        return self._follow_ups(request, options, lane, ranked, weights, fused)[: request.fetch_k]

    def _follow_ups(self, request: SearchRequest, options: dict[str, Any], lane: Any,
                    ranked: dict[str, list[RetrievedItem]], weights: dict[str, float],
                    fused: list[RetrievedItem]) -> list[RetrievedItem]:
        """The LLM hops (see the class docstring): ``fused`` with each follow-up query's lane results fused in."""
        if not options["max_hops"]:
            return fused
        llm, _ = self.context.llm()
        if llm is None:
            return fused

        info = request.info.setdefault("multi_hop", {"rounds": 1, "bridges": []})
        hops: list[dict[str, Any]] = []
        info["follow_ups"] = hops
        asked = {" ".join(request.query.lower().split())}
        for hop in range(1, options["max_hops"] + 1):
            with request.stage("follow_up"):
                out = FollowUp(llm, passages=options["follow_up_chunks"]).run(request.query, fused)
            if out.error is not None and not out.error.startswith("produced no usable"):
                request.fallbacks.append(f"multi_hop follow-up {hop}: {request.context.error_text(out.error)}")
                info["follow_up_stop"] = f"hop {hop}: the model failed"
                break
            query = out.queries[0] if out.queries else ""
            if not query or " ".join(query.lower().split()) in asked:
                info["follow_up_stop"] = f"hop {hop}: " + ("a repeated query" if query else "no query: nothing missing")
                break
            asked.add(" ".join(query.lower().split()))
            sub = dataclasses.replace(request, query=query, _vector=None, lanes_run=[], fallbacks=[],
                                      timings_ms={}, info={})
            ranked[f"hop {hop}: {query}"] = found = lane(sub)
            for stage, ms in sub.timings_ms.items():
                request.timings_ms[stage] = request.timings_ms.get(stage, 0.0) + ms
            hops.append({"query": query, "results": len(found), "tokens_in": out.tokens_in,
                         "tokens_out": out.tokens_out, "latency_ms": round(out.latency_ms, 1)})
            with request.stage("fusion"):
                fused = fusion.rrf(ranked, k=request.fetch_k * options["lane_multiplier"], rrf_k=options["rrf_k"],
                                   weights=weights)
        return fused

    @staticmethod
    def _bridges(graph: Any, walk: Any, top: list[RetrievedItem], retrieved: list[RetrievedItem], used: set[int],
                 limit: int) -> list[int]:
        """Readable entities of the ``top`` chunks not used yet that a readable chunk outside ``retrieved`` also
        mentions (an entity only the retrieved chunks name leads nowhere new), per chunk in rank order, most
        specific first."""
        have = np.zeros(graph.n_chunks, dtype=bool)
        have[[n for n in map(graph.chunk_node, (i.chunk_id for i in retrieved)) if n is not None]] = True
        elsewhere = walk.visible_chunks & ~have
        out: list[int] = []
        for item in top:
            node = graph.chunk_node(item.chunk_id)
            if node is None:
                continue
            candidates = [int(e) for e in graph.entities_of(node) if walk.visible_entities[e] and int(e) not in used
                          and elsewhere[graph.mentions_t[int(e)].indices].any()]
            candidates.sort(key=lambda e: (graph.chunk_frequency[e], e))
            for entity in candidates:
                if entity not in out:
                    out.append(entity)
                if len(out) >= limit:
                    return out
        return out
