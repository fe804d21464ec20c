"""raptor: RAPTOR-lite retrieval. Sections' summaries first, their chunks re-scored, mixed with direct chunk matches.

The summary level is built by ``ragloom.indexing.summaries.sync_summaries`` (the ``summaries_<chunking>``
asset); without it the direct matches answer alone and ``fallbacks`` says why.
"""

from __future__ import annotations

from typing import Any

from ragloom.errors import RagloomError
from ragloom.filters import Condition
from ragloom.indexing.summaries import summary_collection
from ragloom.options import Option
from ragloom.retrieval import fusion, lanes
from ragloom.retrieval.base import Retriever, SearchRequest, register_retrieval_strategy
from ragloom.types import RetrievedItem

SECTION_CHUNKS = "meta_section_chunks"  # a summary object's chunk ids (metadata "section_chunks" as stored)


@register_retrieval_strategy("raptor")
class RaptorRetriever(Retriever):
    """Three store queries with the ``lane``: the ``sections`` best section summaries of the chunking's summary
    level; the chunks of those sections, re-scored against the query (the lane restricted to their ids); and
    the chunking's chunks directly. The two chunk lists are fused (``fusion``: RRF, or min-max weighted
    scores), the sections' weighted ``section_weight``. ``info["raptor"]`` names the sections used."""

    summary = "RAPTOR-lite: section summaries first, their chunks re-scored, mixed with direct chunk matches"
    needs_summaries = True  # ragloom eval builds the summary level of each chunking it ingests

    declared_options: dict[str, Option] = {
        "sections": Option(5, min=1, max=50, help="section summaries retrieved first"),
        # measured on MuSiQue (100) and ObliQA (150): rrf at weight 1 lost 0.016 and 0.092 passage nDCG@10 to
        # hybrid; weighted at 0.3 is within 0.012 of it on both (README, RAPTOR-lite)
        "section_weight": Option(0.3, min=0.0, max=100.0,
                                 help="fusion weight of the sections' chunks (direct matches weigh 1)"),
        "lane": Option("hybrid", choices=lanes.LANES, help="the lane every query runs"),
        "alpha": lanes.ALPHA,
        "fusion": Option("weighted", choices=("rrf", "weighted"),
                         help="how the two chunk lists are fused: rrf (ranks) or weighted (min-max scores)"),
        "rrf_k": Option(fusion.DEFAULT_RRF_K, min=0, max=10_000, help="fusion=rrf: the k in weight / (rrf_k + rank)"),
    }

    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        def lane(collection: str, k: int, *extra: Condition) -> list[RetrievedItem]:
            return lanes.run(options["lane"], request, collection, k, *extra, alpha=options["alpha"])

        direct = lane(self.chunking, request.fetch_k)
        level = summary_collection(self.chunking)
        try:
            built = bool(self.context.vectors.property_types(level))
        except RagloomError as e:  # no such collection, or the store cannot say
            built = False
            why = (f"no summary level for {self.chunking!r} (build the summaries_{self.chunking} asset): "
                   f"{request.context.error_text(e)}")
        else:
            why = f"the summary level of {self.chunking!r} is empty"
        if not built:
            request.fallbacks.append(f"raptor->{options['lane']}: {why}")
            return direct
        with request.stage("sections"):
            sections = lane(level, options["sections"])
        chunk_ids = list(dict.fromkeys(cid for s in sections for cid in s.metadata.get(SECTION_CHUNKS) or ()))
        under = lane(self.chunking, min(len(chunk_ids), request.fetch_k),
                     Condition("chunk_id", "chunk_id", "in", chunk_ids)) if chunk_ids else []
        request.info["raptor"] = {"sections": [s.metadata.get("meta_section_key") for s in sections],
                                  "section_chunks": len(chunk_ids), "rescored": len(under)}
        with request.stage("fusion"):
            return fusion.fuse({"direct": direct, "sections": under}, options["fusion"], k=request.fetch_k,
                               rrf_k=options["rrf_k"], weights={"sections": options["section_weight"]})
