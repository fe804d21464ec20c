"""POST /v1/ask: retrieval within the caller's scope, answered with citations through the LLM layer."""

from __future__ import annotations

from fastapi import APIRouter, Request

from ragloom.service.auth import CallerDep
from ragloom.service.models import AskRequest, AskResponse
from ragloom.service.routers.query import to_query

router = APIRouter(prefix="/v1", tags=["ask"])


@router.post("/ask", response_model=AskResponse, summary="Answer with citations from the caller's scope")
async def ask(body: AskRequest, request: Request, who: CallerDep) -> AskResponse:
    rag = request.app.state.rag
    answer = await rag.run_blocking(rag.ask, to_query(body, who, getattr(rag, "profiles", None)))
    request.app.state.metrics.observe_adaptive(answer.retrieval)  # an adaptive retrieval counts as /v1/query's
    out = answer.to_dict()
    keys = ("question", "answer", "citations", "context", "abstained", "abstain_reason", "model_configured",
            "message", "confidence")
    return AskResponse(**{k: out[k] for k in keys}, details={k: v for k, v in out.items() if k not in keys})
