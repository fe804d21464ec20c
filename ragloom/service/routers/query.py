"""POST /v1/query: retrieval within the caller's scope."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from ragloom.dynamic import DYNAMIC
from ragloom.profiles import Profiles
from ragloom.query import parse_query
from ragloom.retrieval.postprocess import Citation
from ragloom.retrieval.query import Query
from ragloom.service.auth import CallerDep
from ragloom.service.keys import KeyRecord
from ragloom.service.models import QueryRequest, QueryResponse, ResultItem, Span
from ragloom.types import ResultInfo, RetrievalResult, RetrievedItem

router = APIRouter(prefix="/v1", tags=["query"])
_CORE = ("title", "source_path", "start", "end", "scope_path", "scope_tenant", "scope_user", "scope_chat",
         "scope_agent", "vector")


def citation(item: RetrievedItem) -> str:
    """Where a reader finds the passage (``Citation.where``)."""
    return Citation.of(item).where()


def item_body(item: RetrievedItem) -> ResultItem:
    meta = item.metadata
    return ResultItem(
        rank=item.rank, chunk_id=item.chunk_id, document_id=item.document_id, title=str(meta.get("title") or ""),
        source_path=str(meta.get("source_path") or ""), heading_path=list(item.heading_path),
        span=Span(start=meta.get("start"), end=meta.get("end")), score=float(item.score),
        lane_scores={k: float(v) for k, v in item.lane_scores.items()}, citation=citation(item), text=item.text,
        dynamic=bool(meta.get(f"meta_{DYNAMIC}")), scope=str(meta.get("scope_path") or ""),
        metadata={k: v for k, v in meta.items() if k not in _CORE},
    )


def result_body(result: RetrievalResult) -> QueryResponse:
    return QueryResponse(query=result.query, items=[item_body(i) for i in result.items],
                         metadata=result.metadata.to_dict())


def to_query(body: QueryRequest, who: KeyRecord, profiles: Profiles | None = None) -> Query:
    """The request as a typed ``Query`` through the one parser, its scope narrowed to the caller's. Only the
    fields the request set are passed, so a named profile fills the others."""
    fields = body.model_dump(exclude={"query", "scope"}, exclude_unset=True)
    return parse_query(fields, text=body.query, scope=who.narrow(body.scope), profiles=profiles)


async def run_query(request: Request, who: KeyRecord, body: QueryRequest) -> RetrievalResult:
    """The query, narrowed to the caller's scope, with its metrics recorded."""
    state = request.app.state
    result = await state.rag.aquery(to_query(body, who, getattr(state.rag, "profiles", None)))
    record_query(state.metrics, result.metadata, body.strategy)
    return result


def record_query(metrics: Any, meta: ResultInfo, asked: str) -> None:
    strategy = meta.strategy or asked
    metrics.query_seconds.observe(meta.timings_ms.get("total", 0.0) / 1000, strategy)
    if meta.fallbacks:
        metrics.fallbacks.inc(strategy)
    if meta.abstained:
        metrics.abstentions.inc(strategy)
    metrics.observe_adaptive(meta.details)


@router.post("/query", response_model=QueryResponse, summary="Retrieve chunks within the caller's scope")
async def query(body: QueryRequest, request: Request, who: CallerDep) -> QueryResponse:
    return result_body(await run_query(request, who, body))
