"""A query asking for namespaces before any chunk has one must not re-read the collection's schema every time."""

from __future__ import annotations

import ragloom.retrieval.base as base
from ragloom.retrieval.base import RetrievalContext


class SchemaCounter:
    """A vector store's schema reads, counted (the only store call ``visibility`` makes)."""

    def __init__(self) -> None:
        self.refreshes = 0

    def property_types(self, collection: str, refresh: bool = False) -> dict[str, str]:
        self.refreshes += refresh
        return {"document_id": "text", "scope_path": "text"}  # no namespace property yet


def test_a_missing_namespace_property_is_looked_for_at_most_once_per_window(monkeypatch):
    store = SchemaCounter()
    context = RetrievalContext(vectors=store)
    clock = [1000.0]
    monkeypatch.setattr(base.time, "monotonic", lambda: clock[0])
    for _ in range(5):
        context.visibility("recursive", exclude_dynamic=False, namespaces=["hr"])
    assert store.refreshes == 1
    clock[0] += base.SCHEMA_RECHECK_SECONDS + 0.1  # after the window, ingestion may have added it: look again
    context.visibility("recursive", exclude_dynamic=False, namespaces=["hr"])
    context.visibility("other", exclude_dynamic=False, namespaces=["hr"])  # each collection has its own window
    assert store.refreshes == 3
    context.visibility("recursive", exclude_dynamic=False, namespaces=None)  # no namespaces asked: no re-read
    assert store.refreshes == 3
