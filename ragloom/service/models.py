"""Request and response bodies: the API's documentation (they make the OpenAPI schema at /docs)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ragloom.dynamic import MAX_TEXT_CHARS, MAX_TTL_SECONDS
from ragloom.query import MAX_TOKEN_BUDGET
from ragloom.retrieval import available_strategies
from ragloom.retrieval.query import MAX_K, MAX_QUERY_CHARS


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(..., min_length=1, max_length=MAX_QUERY_CHARS, description="the question or search text")
    strategy: str = Field("hybrid", description=" | ".join(available_strategies()) + "; another name is a 400 "
                                                "unless unknown_strategy is fallback")
    unknown_strategy: Literal["error", "fallback"] = Field("error", description="fallback: an unknown strategy "
                                                           "runs dense, with a warning in the result")
    k: int = Field(5, ge=1, le=MAX_K)
    chunking: str | None = Field(None, description="whose collection: recursive | semantic | hierarchical | "
                                                   "headered; default: the strategy's own")
    filters: dict[str, Any] | None = Field(None, description="metadata filter (the filter language)")
    scope: str | None = Field(None, description="tenant/user[/chat[/agent]] inside the key's own; default: the "
                                                "key's scope")
    namespaces: list[str] | None = Field(None, description="only documents of these namespaces; default: all; "
                                                           "an empty list skips retrieval")
    exclude_dynamic: bool = Field(False, description="leave out injected (dynamic) items")
    exclude_tools: list[str] | None = Field(None, description="leave out injected results of these tools")
    profile: str | None = Field(None, max_length=64, description="an agent profile (GET /v1/profiles): its fields "
                                "fill what this request leaves out")
    options: dict[str, Any] = Field(default_factory=dict, description="strategy and post-processing options, each "
                                    "checked against its declaration (GET /v1/strategies lists them)")
    transforms: list[str] | None = Field(None, description="query transforms (reformulate, multi_query, hyde, "
                                         "step_back, decompose, prf); default RAGLOOM_LLM_TRANSFORMS")
    transform_options: dict[str, dict[str, Any]] = Field(default_factory=dict, description="per transform, its "
                                                         "options (bounded), e.g. {\"multi_query\": {\"n\": 4}}")


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


class AskRequest(QueryRequest):
    """A query, answered with citations by the configured model (RAGLOOM_LLM_*)."""

    generation: str | None = Field(None, description="simple | cot | reflect; default RAGLOOM_LLM_GENERATION")
    token_budget: int | None = Field(None, ge=100, le=MAX_TOKEN_BUDGET, description="context tokens for the model")
    use_cache: bool = True
    generation_options: dict[str, Any] = Field(default_factory=dict, description="the generation strategy's "
                                               "options (bounded), e.g. {\"rounds\": 2} for reflect")


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
