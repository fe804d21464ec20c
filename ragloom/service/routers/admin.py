"""POST /v1/admin/promote: an admin key moves a document up to its tenant or to __shared__ (the rule:
``ragloom.promotion``, docs/security.md). Every promotion is logged with the key id."""

from __future__ import annotations

import dataclasses
import logging

from fastapi import APIRouter, Request

from ragloom.service.auth import AdminDep
from ragloom.service.models import PromoteRequest, PromoteResponse
from ragloom.types import Scope

router = APIRouter(prefix="/v1/admin", tags=["admin"])
log = logging.getLogger("ragloom.service.admin")


@router.post("/promote", response_model=PromoteResponse, summary="Move a document to the tenant or __shared__")
async def promote(body: PromoteRequest, request: Request, who: AdminDep) -> PromoteResponse:
    target = Scope(who.tenant) if body.to == "tenant" else Scope()
    state = request.app.state
    moved = await state.rag.run_blocking(state.rag.promote, list(state.settings.chunkings), body.document_id,
                                         who.scope, target)
    log.info("promotion by key %s: %r from %s to %s", who.key_id, body.document_id, moved.from_scopes, moved.to_scope)
    return PromoteResponse(**dataclasses.asdict(moved))
