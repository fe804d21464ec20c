"""Authentication, the per-key rate limit and scope narrowing, in one place for every door of the service.

``Gate.admit`` is the one check: the FastAPI dependency ``caller`` (every /v1 route), the ``KeyRequired`` ASGI
wrapper (the MCP endpoint mounted at /mcp, which FastAPI's dependencies never see) and the stdio MCP server
(``ragloom mcp``, per tool call) all go through it, so a key is refused, revoked and limited the same way.

A request names a scope inside its key's principal (``acme/alice`` may ask for ``acme/alice/chat7`` or
``acme/alice/chat7/agent2``) and never outside it: another tenant or user, or a wider scope, is 403.
A missing, unknown or revoked key is 401. Each key has a token bucket (``RAGLOOM_SERVICE_RATE_PER_MINUTE``);
an empty bucket is 429 with ``Retry-After``. Failed authentications have a bucket per client address
(``RAGLOOM_SERVICE_AUTH_FAILURES_PER_MINUTE``): once it is empty, that address gets 429 instead of 401. The
buckets live in the process: each worker process (and each replica) counts on its own.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Scope as ASGIScope

from ragloom.service.keys import KeyRecord, KeyStore


class RateLimiter:
    """Token buckets per name (a key id, or a client address for failed authentications): ``per_minute``
    requests, bursts up to the same number. Full buckets are forgotten once there are many (addresses are many)."""

    max_buckets = 10_000

    def __init__(self, per_minute: int) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key_id: str) -> float:
        """0 when allowed; else the seconds until a token is back."""
        now = time.monotonic()
        with self._lock:
            if len(self._buckets) > self.max_buckets:
                self._buckets = {name: (t, at) for name, (t, at) in self._buckets.items()
                                 if t + (now - at) * self.rate < self.capacity}
            tokens, stamp = self._buckets.get(key_id, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - stamp) * self.rate)
            if tokens >= 1.0:
                self._buckets[key_id] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key_id] = (tokens, now)
            return (1.0 - tokens) / self.rate


class Refused(Exception):
    """A request the gate turned away: its HTTP status, the reason for the caller, and headers to send."""

    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers or {}


class Gate:
    """The keys, the per-key buckets and the failed-authentication buckets of one service (or stdio server)."""

    def __init__(self, keys: KeyStore, per_minute: int, failures_per_minute: int) -> None:
        self.keys = keys
        self.limiter = RateLimiter(per_minute)
        self.auth_failures = RateLimiter(failures_per_minute)

    def admit(self, key: str | None, address: str) -> KeyRecord:
        """The caller behind ``key``, after the key check and the rate limit; ``Refused`` otherwise.
        ``address``: the direct peer's (uvicorn runs without proxy headers: behind a proxy, the proxy's)."""
        record: KeyRecord | None = self.keys.lookup(key)
        if record is None:
            wait = self.auth_failures.take(address)
            if wait > 0:
                raise Refused(429, "too many failed authentications from this address", _retry(wait))
            raise Refused(401, "missing, unknown or revoked API key", {"WWW-Authenticate": "Bearer"})
        wait = self.limiter.take(record.key_id)
        if wait > 0:
            raise Refused(429, "rate limit exceeded for this key", _retry(wait))
        return record


def _retry(wait: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(wait)))}


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request presents: ``Authorization: Bearer <key>`` or ``X-API-Key``."""
    header = headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return headers.get("x-api-key")


async def caller(request: Request) -> KeyRecord:
    """The request's caller, after the key check and the rate limit. On the event loop: the check is a file stat,
    one SHA-256 and a token bucket, and a plain ``def`` dependency would send every request to FastAPI's thread
    pool and back for it (as the MCP endpoint's ``KeyRequired`` does, the loop runs it itself)."""
    return authenticate(request, presented_key(request.headers))


def authenticate(request: Request, key: str | None) -> KeyRecord:
    try:
        who = request.app.state.gate.admit(key, request.client.host if request.client else "unknown")
    except Refused as e:
        raise HTTPException(e.status, e.detail, headers=e.headers) from e
    request.state.key_id = who.key_id
    return who


class KeyRequired:
    """ASGI wrapper for an app FastAPI's dependencies do not reach (the MCP endpoint): the gate's check on every
    HTTP request, the caller left in ``scope["state"]["caller"]``, a refusal answered with its status and
    ``refusal(refused)`` as the JSON body (default: ``{"detail": why}``, as /v1 answers)."""

    def __init__(self, app: ASGIApp, gate: Gate, refusal: Callable[[Refused], Any] | None = None) -> None:
        self.app = app
        self.gate = gate
        self.refusal = refusal or (lambda e: {"detail": e.detail})

    async def __call__(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        client = scope.get("client")
        try:
            who = self.gate.admit(presented_key(headers), client[0] if client else "unknown")
        except Refused as e:
            response = JSONResponse(self.refusal(e), status_code=e.status, headers=e.headers)
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})["caller"] = who
        await self.app(scope, receive, send)


CallerDep = Annotated[KeyRecord, Depends(caller)]


async def admin(who: CallerDep) -> KeyRecord:
    # a user-level admin record (written into the keys file by hand: `keys create` refuses one) is no admin
    if not who.admin or who.user:
        raise HTTPException(403, "this endpoint needs a tenant-wide admin key")
    return who


AdminDep = Annotated[KeyRecord, Depends(admin)]
