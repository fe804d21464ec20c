"""Authentication and scope narrowing as FastAPI dependencies: no route can forget them.

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
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from ragloom.errors import ScopeError
from ragloom.service.keys import KeyRecord
from ragloom.types import Scope


@dataclass(frozen=True)
class Caller:
    """The authenticated key behind a request (its id, never the key) and its principal."""

    key_id: str
    tenant: str
    user: str
    admin: bool

    @property
    def scope(self) -> Scope:
        return Scope(self.tenant, self.user)

    def narrow(self, requested: str | None) -> Scope:
        """The requested scope if it lies within this caller's own; None or '' means the caller's own."""
        if not requested:
            return self.scope
        try:
            scope = Scope.from_path(requested)
        except ScopeError as e:
            raise HTTPException(400, f"scope: {e}") from e
        if self.scope.path not in scope.visible_paths():
            raise HTTPException(403, f"scope {scope.path!r} is outside this key's scope {self.scope.path!r}")
        return scope

    def owns(self, scope_path: str) -> bool:
        """Whether a stored scope path lies within this caller's subtree."""
        try:
            return self.scope.path in Scope.from_path(scope_path).visible_paths()
        except ScopeError:
            return False


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


def _presented_key(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return request.headers.get("x-api-key")


def caller(request: Request) -> Caller:
    """The request's caller, after the key check and the rate limit."""
    return authenticate(request, _presented_key(request))


def authenticate(request: Request, key: str | None) -> Caller:
    state = request.app.state
    record: KeyRecord | None = state.keys.lookup(key)
    if record is None:
        # the direct peer's address (uvicorn runs without proxy headers: behind a proxy, the proxy's)
        address = request.client.host if request.client else "unknown"
        wait = state.auth_failures.take(address)
        if wait > 0:
            raise HTTPException(429, "too many failed authentications from this address",
                                headers={"Retry-After": str(max(1, math.ceil(wait)))})
        raise HTTPException(401, "missing, unknown or revoked API key", headers={"WWW-Authenticate": "Bearer"})
    wait = state.limiter.take(record.key_id)
    if wait > 0:
        raise HTTPException(429, "rate limit exceeded for this key",
                            headers={"Retry-After": str(max(1, math.ceil(wait)))})
    request.state.key_id = record.key_id
    return Caller(record.key_id, record.tenant, record.user, record.admin)


CallerDep = Annotated[Caller, Depends(caller)]


def admin(who: CallerDep) -> Caller:
    # a user-level admin record (written into the keys file by hand: `keys create` refuses one) is no admin
    if not who.admin or who.user:
        raise HTTPException(403, "this endpoint needs a tenant-wide admin key")
    return who


AdminDep = Annotated[Caller, Depends(admin)]
