"""GET /v1/strategies and GET /v1/profiles: what a query may name (the MCP tool list_strategies says the same)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from ragloom.retrieval import describe_strategies
from ragloom.service.auth import CallerDep

router = APIRouter(prefix="/v1", tags=["catalog"])


def strategies() -> list[dict[str, Any]]:
    return describe_strategies()


def profiles(rag: Any) -> list[dict[str, Any]]:
    found = getattr(rag, "profiles", None)
    return found.describe() if found else []


@router.get("/strategies", summary="The retrieval strategies with their options (and the post-processing ones)")
async def list_strategies(who: CallerDep) -> list[dict[str, Any]]:
    return strategies()


@router.get("/profiles", summary="The agent profiles (RAGLOOM_AGENT_PROFILES): fields and remembered tools")
async def list_profiles(request: Request, who: CallerDep) -> list[dict[str, Any]]:
    return profiles(request.app.state.rag)
