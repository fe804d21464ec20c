"""POST /v1/inject and DELETE /v1/inject/{item_id}: dynamic items in the caller's chat or agent scope."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request

from ragloom.service.auth import CallerDep
from ragloom.service.models import DeleteResponse, InjectRequest, InjectResponse

router = APIRouter(prefix="/v1/inject", tags=["inject"])


@router.post("", response_model=InjectResponse, status_code=201,
             summary="Embed and write a dynamic item; retrievable by the next query")
async def inject(body: InjectRequest, request: Request, who: CallerDep) -> InjectResponse:
    scope = who.narrow(body.scope)
    if not scope.chat:
        raise HTTPException(400, "inject into a chat scope (tenant/user/chat) or an agent scope (…/chat/agent)")
    state = request.app.state
    rag = state.rag
    item = await rag.run_blocking(rag.inject, state.item_strategies, body.text, scope, metadata=body.metadata,
                                  ttl_seconds=body.ttl_seconds, namespace=body.namespace, title=body.title)
    state.metrics.injected.inc()
    return InjectResponse(item_id=item.item_id, scope=scope.path, strategies=item.strategies,
                          expires_at=item.expires_at.isoformat() if item.expires_at else None)


@router.delete("/{item_id}", response_model=DeleteResponse, summary="Remove a dynamic item")
async def delete(item_id: str, request: Request, who: CallerDep) -> DeleteResponse:
    state = request.app.state
    deleted = await state.rag.run_blocking(state.rag.delete_item, state.item_strategies, item_id, who.scope)
    if not deleted:  # unknown, or someone else's: the same answer, so ids cannot be probed
        raise HTTPException(404, f"no dynamic item {item_id!r} in this key's scope")
    return DeleteResponse(item_id=item_id, deleted_chunks=deleted)
