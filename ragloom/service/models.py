"""Request and response bodies: the API's documentation (they make the OpenAPI schema at /docs)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from ragloom.dynamic import MAX_TEXT_CHARS, MAX_TTL_SECONDS
from ragloom.retrieval import available_strategies
from ragloom.retrieval.query import MAX_QUERY_CHARS, declared_fields


def _request_model(name: str, doc: str, ask: bool) -> type[BaseModel]:
    """A request body made from the ``Query`` field declarations (ragloom.retrieval.query), so a new query field
    reaches HTTP and MCP without an edit here. ``query`` is the text; a field left out is left out of the
    ``Query`` (a profile, else the default, fills it)."""
    fields: dict[str, Any] = {
        "query": (str, Field(..., min_length=1, max_length=MAX_QUERY_CHARS, description="the question or search text")),
        "unknown_strategy": (Literal["error", "fallback"], Field("error", description="fallback: an unknown "
                                                                 "strategy runs dense, with a warning in the result")),
    }
    for field_name, (declared, default) in declared_fields(ask=ask).items():
        shown = default if isinstance(default, (str, int, float, bool)) and default != "" else None
        wire = declared.wire if shown is not None else declared.wire | None
        fields[field_name] = (wire, Field(shown, description=declared.help, **declared.bounds))
    fields["strategy"] = (str, Field("hybrid", description=" | ".join(available_strategies()) + "; another name is "
                                     "a 400 unless unknown_strategy is fallback"))
    model = create_model(name, __config__=ConfigDict(extra="forbid"), **fields)
    model.__doc__ = doc
    return model


QueryRequest = _request_model("QueryRequest", "A query: retrieval within the caller's scope.", ask=False)
AskRequest = _request_model("AskRequest", "A query, answered with citations by the configured model "
                            "(RAGLOOM_LLM_*).", ask=True)


class Span(BaseModel):
    start: int | None = None
    end: int | None = None


class ResultItem(BaseModel):
    rank: int
    chunk_id: str
    document_id: str
    title: str = ""
    source_path: str = ""
    heading_path: list[str] = []
    span: Span
    score: float
    lane_scores: dict[str, float] = {}
    citation: str
    text: str
    dynamic: bool = False
    scope: str = ""
    metadata: dict[str, Any] = {}


class QueryResponse(BaseModel):
    query: str
    items: list[ResultItem]
    metadata: dict[str, Any] = Field(..., description="strategy, lanes_run, fallbacks, timings_ms, abstained, ...")


class InjectRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(..., min_length=1, max_length=MAX_TEXT_CHARS)
    scope: str = Field(..., description="the chat (tenant/user/chat) or agent (…/chat/agent) scope it goes to")
    title: str = Field("", max_length=200)
    metadata: dict[str, Any] = Field(default_factory=dict)
    namespace: str = Field("", max_length=64)
    ttl_seconds: float | None = Field(None, gt=0, le=MAX_TTL_SECONDS, description="gone after this; default: the "
                                      "profile's TTL for the tool, else never")
    tool: str | None = Field(None, min_length=1, max_length=64, description="the tool whose result this is "
                             "(excluded at query time by exclude_tools)")
    profile: str | None = Field(None, min_length=1, max_length=64, description="the agent's profile: only the "
                                "tools it remembers are accepted (400 otherwise)")


class InjectResponse(BaseModel):
    item_id: str
    scope: str
    strategies: list[str]
    expires_at: str | None


class DeleteResponse(BaseModel):
    item_id: str
    deleted_chunks: int


class UploadResponse(BaseModel):
    upload_id: str
    document_id: str
    scope: str
    status: Literal["queued", "indexed", "rejected"]
    reason: str | None = None


class PromoteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    document_id: str = Field(..., min_length=1, max_length=1000)
    to: Literal["tenant", "shared"] = Field(..., description="the key's tenant, or __shared__ (every tenant)")


class PromoteResponse(BaseModel):
    document_id: str
    from_scopes: list[str]
    to_scope: str
    weaviate_objects: int
    neo4j_chunks: int


class AskResponse(BaseModel):
    question: str
    answer: str
    citations: list[dict[str, Any]]
    context: list[dict[str, Any]]
    abstained: bool
    abstain_reason: str | None
    model_configured: bool
    message: str
    confidence: float | None
    details: dict[str, Any] = Field(..., description="generation, model, tokens, latency_ms, retrieval, cached, ...")
