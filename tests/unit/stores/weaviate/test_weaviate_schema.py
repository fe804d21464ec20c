"""The Weaviate store's pure parts: metadata naming and coercion, the object a chunk
becomes, the property configurations, and the one classifier of Weaviate failures (no server)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import grpc
import httpx
import numpy as np
import pytest
from weaviate.exceptions import WeaviateConnectionError, WeaviateQueryError, WeaviateRetryError

from ragloom.errors import StoreError
from ragloom.filters import CORE_FIELDS, meta_property_name
from ragloom.metadata import MetadataLayout, as_date, coerce
from ragloom.stores.weaviate.errors import is_weaviate_failure, store_errors
from ragloom.stores.weaviate.schema import CORE_PROPERTIES, core_properties, meta_property, object_properties
from ragloom.types import HEADING_SEPARATOR, Chunk, Scope


def test_meta_names_and_coercion():
    assert meta_property_name("Review Status") == meta_property_name("review-status") == "meta_review_status"
    assert coerce("2024-01-05", "DATE") == datetime(2024, 1, 5, tzinfo=UTC)
    assert coerce(date(2024, 1, 5), "DATE") == datetime(2024, 1, 5, tzinfo=UTC)
    assert coerce("2024-01-05", "TEXT") == "2024-01-05"
    assert coerce(3, "NUMBER") == 3.0 and coerce(4.0, "INT") == 4
    assert coerce("x", "TEXT_ARRAY") == ["x"] and coerce([1, True, None], "TEXT_ARRAY") == ["1", "true"]
    assert coerce([], "TEXT_ARRAY") is None and coerce(float("nan"), "NUMBER") is None
    for value, data_type in ((4.5, "INT"), ("soon", "DATE"), (1, "BOOL"), (True, "INT"), (["a"], "TEXT"),
                             (2**70, "INT")):
        with pytest.raises(ValueError):
            coerce(value, data_type)


def test_dates_are_aware_and_naive_means_utc():
    assert as_date(datetime(2024, 1, 5, 10)) == datetime(2024, 1, 5, 10, tzinfo=UTC)
    plus2 = timezone(timedelta(hours=2))
    assert as_date("2024-01-05T10:00:00+02:00") == datetime(2024, 1, 5, 10, tzinfo=plus2)
    assert as_date("2024-01-05t10:00z") == datetime(2024, 1, 5, 10, tzinfo=UTC)
    for not_a_date in ("2024-13-45", "20240105", "yesterday", 20240105, None, "2024-01-05 junk"):
        assert as_date(not_a_date) is None


def test_a_chunk_becomes_core_properties_and_its_metadata():
    chunk = Chunk(chunk_id="c1", document_id="d1", strategy="hierarchical", text="body", start=3, end=7,
                  token_count=1, position=2, level=1, parent_id="p1", heading_path=["A", "B > C"],
                  embed_text="A > B > C body", scope=Scope("acme", "alice"),
                  metadata={"title": "T", "source_path": "docs/a.md", "Review Status": "ok", "nested": {"n": 1},
                            "empty": [], "gone": None})
    props = object_properties(chunk, MetadataLayout())
    assert set(props) - set(CORE_PROPERTIES) == {"meta_review_status", "meta_nested_n"}
    assert (props["meta_review_status"], props["meta_nested_n"]) == (["ok"], ["1"])  # undeclared: text
    assert props["heading_path"] == HEADING_SEPARATOR.join(["A", "B > C"])
    assert props["heading_parts"] == ["A", "B > C"]  # the exact pieces, even with the separator inside one
    assert (props["title"], props["source_path"], props["parent_id"]) == ("T", "docs/a.md", "p1")
    assert (props["scope_path"], props["scope_tenant"], props["scope_user"]) == ("acme/alice", "acme", "alice")
    # what was embedded stays in the chunks table: no read uses it, and Weaviate decodes every object of a hybrid
    # call's pools, so a stored copy of the text would cost every query
    assert "embed_text" not in props and "embed_text" not in CORE_PROPERTIES
    assert "parent_id" not in object_properties(Chunk(chunk_id="c2", document_id="d1", strategy="recursive",
                                                      text="x", start=0, end=1, token_count=1, position=0),
                                                MetadataLayout())


def test_property_configurations():
    props = {p.name: p for p in core_properties()}
    assert list(props) == list(CORE_PROPERTIES)
    assert props["bm25_text"].indexSearchable and props["bm25_text"].tokenization.value == "whitespace"
    # only BM25's property is searched, and only what a filter can name is filterable: every other index costs
    # the server CPU on each write for nothing
    assert [n for n, p in props.items() if p.indexSearchable] == ["bm25_text"]
    filterable = {n for n, p in props.items() if p.indexFilterable}
    assert set(CORE_FIELDS) | {"chunk_id", "scope_path", "scope_tenant", "scope_user", "scope_chat",
                               "scope_agent"} == filterable
    assert props["chunk_id"].tokenization.value == "field" and not props["chunk_id"].indexSearchable
    assert props["level"].tokenization is None and props["text"].indexFilterable is False
    text = meta_property("meta_status", "TEXT_ARRAY")
    assert (text.dataType.value, text.tokenization.value, text.indexSearchable) == ("text[]", "field", False)
    number = meta_property("meta_year", "INT")
    assert (number.dataType.value, number.tokenization, number.indexSearchable) == ("int", None, None)


@pytest.mark.parametrize("error", [
    WeaviateConnectionError("down"), WeaviateQueryError("bad", "gRPC"), ConnectionRefusedError("refused"),
    TimeoutError("slow"), grpc.RpcError(), httpx.ConnectError("no route"),
])
def test_weaviate_failures_become_store_errors_naming_the_operation(error):
    assert is_weaviate_failure(error)
    with pytest.raises(StoreError, match="Weaviate count RagloomX failed") as raised:
        with store_errors("count RagloomX"):
            raise error
    assert raised.value.__cause__ is error


@pytest.mark.parametrize("error", [KeyError("chunk_id"), TypeError("bug"), ValueError("bug")])
def test_our_own_bugs_are_not_store_errors(error):
    assert not is_weaviate_failure(error)
    with pytest.raises(type(error)):
        with store_errors("count RagloomX"):
            raise error


def test_a_failure_can_be_explained_and_store_errors_pass_through():
    with pytest.raises(StoreError, match="^collection X does not exist$"):
        with store_errors("bm25 on X", explain=lambda: "collection X does not exist"):
            raise WeaviateQueryError("class X not found", "GRPC")
    with pytest.raises(StoreError, match="Weaviate bm25 on X failed"):
        with store_errors("bm25 on X", explain=lambda: None):
            raise WeaviateQueryError("class X not found", "GRPC")
    with pytest.raises(StoreError, match="^ours$"):
        with store_errors("bm25 on X", explain=lambda: "not used"):
            raise StoreError("ours")


class _Deadline(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.DEADLINE_EXCEEDED


def _wrapped_deadline() -> WeaviateQueryError:
    try:
        raise _Deadline()
    except _Deadline as e:
        wrapped = WeaviateQueryError("Deadline Exceeded.", "GRPC")
        wrapped.__cause__ = e
        return wrapped


@pytest.mark.parametrize("failure", [WeaviateConnectionError("down"), httpx.ReadTimeout("slow"), _wrapped_deadline()],
                         ids=["connection", "http timeout", "grpc deadline"])
def test_a_server_that_does_not_answer_is_not_asked_again_to_explain(failure):
    """Explaining a failure asks the server (does the collection exist?); a server that timed out or could not be
    reached would only make the caller wait a second time."""
    asked = []
    with pytest.raises(StoreError, match="Weaviate bm25 on X failed: the server did not answer in time"):
        with store_errors("bm25 on X", explain=lambda: asked.append(1) or "collection X does not exist"):
            raise failure
    assert asked == []


class _CountingCollection:
    """A collection whose every insert_many fails as a whole with ``error``, counting the requests."""

    def __init__(self, error: Exception) -> None:
        self.error, self.requests, self.data = error, 0, self

    def insert_many(self, objects):
        self.requests += 1
        raise self.error


@pytest.mark.parametrize(("error", "requests"), [
    (WeaviateRetryError("UNAVAILABLE: failed to connect to all addresses", 3), 1),  # the client backed off already
    (WeaviateConnectionError("down"), 4),  # not retried by the client: our bounded retries (RETRY_DELAYS)
])
def test_a_request_the_client_already_retried_is_not_retried_again(monkeypatch, error, requests):
    from ragloom.stores.weaviate import WeaviateStore, writes

    collection = _CountingCollection(error)
    store = WeaviateStore(object(), "Fake")
    monkeypatch.setattr(store, "exists", lambda strategy: True)
    monkeypatch.setattr(store, "_properties", lambda name, refresh=False: {})
    monkeypatch.setattr(store, "_collection", lambda strategy, write=False: collection)
    monkeypatch.setattr(writes.time, "sleep", lambda seconds: None)
    chunk = Chunk(chunk_id="c1", document_id="d1", strategy="recursive", text="x", start=0, end=1, token_count=1,
                  position=0)
    with pytest.raises(StoreError, match=f"^Weaviate: writing to FakeRecursive failed.*{type(error).__name__}"):
        store.write_chunks("recursive", [chunk], np.ones((1, 4), dtype=np.float32))
    assert collection.requests == requests
