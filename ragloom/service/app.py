"""The FastAPI application: routers, the body-size limit, metrics, error mapping, and the sweeper."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragloom import dynamic
from ragloom.api import Ragloom
from ragloom.errors import RagloomError
from ragloom.service import docs, mcp_server
from ragloom.service.auth import Gate
from ragloom.service.errors import public_error
from ragloom.service.keys import KeyStore
from ragloom.service.metrics import ServiceMetrics
from ragloom.service.routers import admin, ask, catalog, documents, health, inject, playground, query
from ragloom.settings import Settings

log = logging.getLogger("ragloom.service")


class HttpMiddleware:
    """A plain ASGI middleware (no task group per request): ``http`` sees each HTTP request, the rest passes by."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.http(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


class BodyLimit(HttpMiddleware):
    """413 for a body over ``limit`` bytes, by Content-Length or, for chunked bodies, while it streams."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        super().__init__(app)
        self.limit = limit

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _too_large(self.limit, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:  # raised inside the route's body read: answered as a 413 there
                    raise HTTPException(413, f"request body over the limit of {self.limit} bytes")
            return message

        await self.app(scope, counted, send)


async def _too_large(limit: int, send: Send) -> None:
    response = JSONResponse({"detail": f"request body over the limit of {limit} bytes"}, status_code=413)
    await send({"type": "http.response.start", "status": 413, "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": response.body})


class Measure(HttpMiddleware):
    """Requests by route and status, and their latency."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics) -> None:
        super().__init__(app)
        self.metrics = metrics

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = _route_name(scope)
            self.metrics.requests.inc(scope["method"], route, str(status))
            self.metrics.request_seconds.observe(time.perf_counter() - started, route)
            if status >= 400:
                self.metrics.errors.inc(str(status))


class PathOnlyAccessLog(logging.Filter):
    """uvicorn's access log lines with the path alone: a query string may carry a secret (a key sent as ``?key=``
    is refused, but it was still written to the log)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        # uvicorn's access record: (client address, method, path with query string, HTTP version, status)
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str) and "?" in args[2]:
            record.args = (args[0], args[1], args[2].split("?", 1)[0], args[3], args[4])
        return True


ACCESS_LOG_FILTER = PathOnlyAccessLog()


def _route_name(scope: Scope) -> str:
    """The matched route's path template (one label per route, whatever its parameters)."""
    return getattr(scope.get("route"), "path", "unmatched")


def create_app(settings: Settings | None = None, rag: Any = None) -> FastAPI:
    """The service. ``rag``: a ``Ragloom`` to serve (tests); by default one is opened at startup and closed at
    shutdown, with concurrent queries sharing model calls."""
    settings = settings or Settings.from_env()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own = rag is None
        if own:
            app.state.rag = await asyncio.to_thread(Ragloom, settings, coalesce_queries=True, hide_schema=True)
        else:
            app.state.rag = rag
        logging.getLogger("uvicorn.access").addFilter(ACCESS_LOG_FILTER)  # after uvicorn configured its logging
        # models and stores loaded before the first request, once (lazy loads would race under concurrency)
        await app.state.rag.run_blocking(app.state.rag.warm, "graph_rag")
        sweeper = asyncio.create_task(_sweep_forever(app))
        log.info("ragloom service ready on its scopes (keys file %s)", settings.resolved_keys_file)
        try:
            async with mcp_sessions.run():
                yield
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            if own:
                await asyncio.to_thread(app.state.rag.close)

    local_docs = docs.have_assets(settings)
    app = FastAPI(title="ragloom", version="1", lifespan=lifespan, docs_url=None if local_docs else "/docs",
                  description="Retrieval over ragloom's stores, scoped by API key. Send the key as "
                              "`Authorization: Bearer <key>`.")
    if local_docs:
        _serve_docs_locally(app, settings)
    app.state.settings = settings
    app.state.gate = Gate(KeyStore(settings.resolved_keys_file), settings.service_rate_per_minute,
                          settings.service_auth_failures_per_minute)
    app.state.keys = app.state.gate.keys
    app.state.metrics = ServiceMetrics()
    app.state.item_strategies = dynamic.item_strategies(settings.chunkings)

    for module in (query, ask, inject, catalog, documents, admin, health, playground):
        app.include_router(module.router)
    # MCP over streamable HTTP: a plain ASGI route, behind the same gate as /v1 (ragloom.service.auth)
    mcp_endpoint, mcp_sessions = mcp_server.http_app(lambda: app.state.rag, app.state.gate, app.state.metrics)
    app.router.routes.append(Route("/mcp", endpoint=mcp_endpoint, methods=["GET", "POST", "DELETE"]))

    @app.exception_handler(RagloomError)
    async def ragloom_error(request: Request, exc: RagloomError) -> JSONResponse:
        status, body = public_error(exc, f"{request.method} {_route_name(request.scope)}")
        headers = {"X-Request-ID": body["request_id"]} if "request_id" in body else None
        return JSONResponse(body, status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's default echoes the input; ours names the fields only (a body may hold secrets)
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in exc.errors()]
        return JSONResponse({"detail": errors}, status_code=422)

    app.add_middleware(BodyLimit, limit=settings.service_max_body_bytes)
    app.add_middleware(Measure, metrics=app.state.metrics)  # outermost: counts the 413s too
    return app


def _serve_docs_locally(app: FastAPI, settings: Settings) -> None:
    """/docs with Swagger UI's files served from the cache (ragloom.service.docs), not from a CDN."""
    app.mount(docs.ASSETS_ROUTE, StaticFiles(directory=docs.assets_dir(settings)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json", title="ragloom API",
                                   swagger_js_url=f"{docs.ASSETS_ROUTE}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{docs.ASSETS_ROUTE}/swagger-ui.css",
                                   swagger_favicon_url=f"{docs.ASSETS_ROUTE}/favicon-32x32.png")


async def _sweep_forever(app: FastAPI) -> None:
    """Delete expired dynamic items every RAGLOOM_SERVICE_SWEEP_SECONDS."""
    settings: Settings = app.state.settings
    while True:
        await asyncio.sleep(settings.service_sweep_seconds)
        try:
            removed = await app.state.rag.run_blocking(app.state.rag.sweep_expired, app.state.item_strategies)
        except RagloomError as e:
            log.warning("sweeping expired dynamic items failed: %s", e)
            continue
        if removed:
            app.state.metrics.swept.inc(amount=removed)
            log.info("swept %d expired dynamic chunks", removed)
