"""Our errors as HTTP answers, in one place for the JSON routes and the playground.

Bad input is the caller's (400) and its message is for the caller. A store or model that fails is ours (503, 502):
the caller gets a generic message and a request id, the details (which may quote Weaviate's, Neo4j's or the model
server's own error text: collection names, hosts, query internals) go to the service log under that id.
"""

from __future__ import annotations

import logging
import secrets

from ragloom.errors import (
    ConfigError,
    ConflictError,
    FilterError,
    ForbiddenError,
    LLMError,
    NotFoundError,
    ParseError,
    RagloomError,
    RetrievalError,
    ScopeError,
    StoreError,
)

log = logging.getLogger("ragloom.service")

STATUS = ((NotFoundError, 404), (ForbiddenError, 403), (ConflictError, 409), (ScopeError, 400), (FilterError, 400),
          (RetrievalError, 400), (ConfigError, 400), (ParseError, 400),
          (StoreError, 503), (LLMError, 502))
GENERIC = {503: "a store is unavailable", 502: "the language model failed", 500: "internal error"}


def status_of(exc: RagloomError) -> int:
    return next((code for kind, code in STATUS if isinstance(exc, kind)), 500)


def public_error(exc: RagloomError, where: str) -> tuple[int, dict[str, str]]:
    """(status, body) for ``exc``; a server-side failure is logged with a request id the body names."""
    status = status_of(exc)
    if status < 500:
        return status, {"detail": str(exc), "error": type(exc).__name__}
    request_id = secrets.token_hex(8)
    log.warning("%s failed [request %s]: %s: %s", where, request_id, type(exc).__name__, exc)
    return status, {"detail": f"{GENERIC[status]}; request id {request_id} (details in the service log)",
                    "error": type(exc).__name__, "request_id": request_id}
