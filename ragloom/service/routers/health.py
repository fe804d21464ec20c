"""GET /healthz (the process answers), /readyz (both stores answer), /metrics (Prometheus text: open when the service
binds loopback, else a valid key; RAGLOOM_SERVICE_METRICS)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from ragloom.service.auth import caller

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    rag = request.app.state.rag

    stores = await rag.run_blocking(rag.ready)
    ready = all(stores.values())
    return JSONResponse({"ready": ready, "stores": stores}, status_code=200 if ready else 503)


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request) -> PlainTextResponse:
    if request.app.state.settings.metrics_need_key:
        await caller(request)  # 401 / 429 like any keyed endpoint
    return PlainTextResponse(request.app.state.metrics.render(), media_type="text/plain; version=0.0.4")
