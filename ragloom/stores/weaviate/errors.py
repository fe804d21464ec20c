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
    called only on failure, may give a better message (e.g. that the collection does not exist)."""
    try:
        yield
    except StoreError:
        raise
    except Exception as e:
        if not is_weaviate_failure(e):
            raise
        reason = explain() if explain is not None else None
        raise StoreError(reason or f"Weaviate {what} failed: {e}") from e
