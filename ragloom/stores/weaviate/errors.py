"""Weaviate's failures, recognised in one place and re-raised as StoreError naming the operation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ragloom.errors import StoreError


def is_weaviate_failure(e: BaseException) -> bool:
    """Whether ``e`` is the server, the client library or the network failing (Weaviate's exceptions, socket
    errors, and the gRPC and HTTP libraries underneath), rather than a bug on our side."""
    from weaviate.exceptions import WeaviateBaseError

    return isinstance(e, WeaviateBaseError | OSError) or type(e).__module__.startswith(("grpc", "httpx", "weaviate"))


@contextmanager
def store_errors(what: str, explain: Callable[[], str | None] | None = None) -> Iterator[None]:
    """Weaviate failures inside the block re-raised as StoreError("Weaviate <what> failed: ..."); ``explain``,
    called only on failure, may give a better message (e.g. that the collection does not exist). Not after a
    timeout or a lost connection: the server is not answering, and asking it again would double the wait."""
    try:
        yield
    except StoreError:
        raise
    except Exception as e:
        if not is_weaviate_failure(e):
            raise
        if not_answering(e):
            raise StoreError(f"Weaviate {what} failed: the server did not answer in time or could not be "
                             f"reached: {e}") from e
        reason = explain() if explain is not None else None
        raise StoreError(reason or f"Weaviate {what} failed: {e}") from e


def not_answering(e: BaseException) -> bool:
    """Whether ``e`` (or what it wraps) is a timeout or a lost connection: a gRPC deadline or an unavailable
    server, an HTTP timeout, or the client's own timeout and connection errors."""
    import httpx
    from weaviate.exceptions import WeaviateConnectionError, WeaviateTimeoutError

    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, WeaviateTimeoutError | WeaviateConnectionError | httpx.TimeoutException
                      | httpx.ConnectError | TimeoutError | ConnectionError):
            return True
        # a gRPC error (grpc comes with weaviate-client: its status read by name, not imported)
        grpc_error = any(kind.__module__.split(".")[0] == "grpc" for kind in type(seen).__mro__)
        code = seen.code() if grpc_error and callable(getattr(seen, "code", None)) else None
        if getattr(code, "name", None) in ("DEADLINE_EXCEEDED", "UNAVAILABLE"):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
