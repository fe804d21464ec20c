"""ragloom as an MCP server (the official ``mcp`` SDK): the tools search, ask, remember, forget and
list_strategies, over stdio (``ragloom mcp``) or streamable HTTP (``ragloom serve``, at /mcp).

Each tool is a door like a /v1 route and does what that route does: its input schema is the route's request
model (so the fields, bounds and descriptions are the HTTP API's, made from the same ``Query`` fields and option
declarations), its caller comes from the same gate (``ragloom.service.auth.Gate``: key, revocation, per-key rate
limit), its scope is narrowed the same way, and it calls the same Python API. A refusal is a tool error whose
text says why.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import HTTPException
from mcp import types
from mcp.server import Server
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragloom import dynamic
from ragloom.api import Ragloom
from ragloom.errors import RagloomError
from ragloom.query import load_profiles
from ragloom.service.auth import Gate, KeyRequired, Refused
from ragloom.service.errors import public_error
from ragloom.service.keys import KeyRecord, KeyStore
from ragloom.service.models import AskRequest, InjectRequest, QueryRequest
from ragloom.service.routers import catalog
from ragloom.service.routers.query import result_body, to_query

KEY_VARIABLE = "RAGLOOM_API_KEY"  # the stdio server's key: it acts as this key's principal


class ForgetRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    item_id: str = Field(..., min_length=1, max_length=100, description="the item_id remember returned")


class NoInput(BaseModel):
    model_config = ConfigDict(extra="forbid")


TOOLS: dict[str, tuple[type[BaseModel], str]] = {
    "search": (QueryRequest, "Retrieve passages for a query within your key's scope (or a chat/agent scope inside "
                             "it); name your agent profile to use its strategy, namespaces and options."),
    "ask": (AskRequest, "Answer a question with citations from your scope (the configured model writes it; "
                        "without one, the ranked context is returned and the answer says so)."),
    "remember": (InjectRequest, "Keep a tool's result (or a note) in a chat scope (tenant/user/chat: every agent "
                                "of the chat) or an agent scope (.../chat/agent), retrievable by the next search; "
                                "with a profile, only the tools it remembers are kept."),
    "forget": (ForgetRequest, "Delete an item remember kept, by its item_id."),
    "list_strategies": (NoInput, "The retrieval strategies with their options, and the agent profiles."),
}

Principal = Callable[[Any], KeyRecord]  # the request context -> its caller (or Refused)


def tool_list() -> list[types.Tool]:
    return [types.Tool(name=name, description=description, input_schema=model.model_json_schema())
            for name, (model, description) in TOOLS.items()]


def build_server(rag: Any, principal: Principal, metrics: Any = None) -> Server[Any]:
    """The MCP server over ``rag`` (a ``Ragloom``); ``principal`` says who calls."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in TOOLS:
            return _error(f"unknown tool {params.name!r:.80}; tools: {', '.join(TOOLS)}")
        model, _ = TOOLS[params.name]
        try:
            who = principal(ctx)
            body = model.model_validate(params.arguments or {})
            out = await HANDLERS[params.name](rag, who, body)
        except Refused as e:
            return _error(f"refused ({e.status}): {e.detail}")
        except ValidationError as e:
            fields = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'input'}: {err['msg']}" for err in e.errors())
            return _error(f"invalid input for {params.name}: {fields}")
        except HTTPException as e:
            return _error(f"refused ({e.status_code}): {e.detail}")
        except RagloomError as e:
            status, body_ = public_error(e, f"mcp {params.name}")
            return _error(f"{body_['detail']} ({status})")
        if metrics is not None and params.name == "remember":
            metrics.injected.inc()
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(out, default=str))],
                                    structured_content=out)

    return Server("ragloom", version="1", instructions="Retrieval over ragloom's stores within your API key's "
                  "scope; list_strategies says what search can do.", on_list_tools=list_tools,
                  on_call_tool=call_tool)


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


async def _search(rag: Any, who: KeyRecord, body: QueryRequest) -> dict[str, Any]:
    result = await rag.aquery(to_query(body, who, rag.profiles))
    return result_body(result).model_dump()


async def _ask(rag: Any, who: KeyRecord, body: AskRequest) -> dict[str, Any]:
    answer = await rag.run_blocking(rag.ask, to_query(body, who, rag.profiles))
    return answer.to_dict()


async def _remember(rag: Any, who: KeyRecord, body: InjectRequest) -> dict[str, Any]:
    scope = who.narrow(body.scope)
    item = await rag.run_blocking(rag.remember, _item_strategies(rag), body.text, scope, tool=body.tool or "",
                                  profile=body.profile or "",
                                  metadata=body.metadata, ttl_seconds=body.ttl_seconds, namespace=body.namespace,
                                  title=body.title)
    return {"item_id": item.item_id, "scope": scope.path, "strategies": item.strategies,
            "expires_at": item.expires_at.isoformat() if item.expires_at else None}


async def _forget(rag: Any, who: KeyRecord, body: ForgetRequest) -> dict[str, Any]:
    deleted = await rag.run_blocking(rag.delete_item, _item_strategies(rag), body.item_id, who.scope)
    if not deleted:  # unknown, or someone else's: the same answer, so ids cannot be probed
        raise HTTPException(404, f"no dynamic item {body.item_id!r} in this key's scope")
    return {"item_id": body.item_id, "deleted_chunks": deleted}


async def _list_strategies(rag: Any, who: KeyRecord, body: NoInput) -> dict[str, Any]:
    return {"strategies": catalog.strategies(), "profiles": catalog.profiles(rag)}


def _item_strategies(rag: Any) -> list[str]:
    """The collections an injected item goes to (the service's ``item_strategies``)."""
    return dynamic.item_strategies(rag.settings.chunkings)


HANDLERS: dict[str, Callable[[Any, KeyRecord, Any], Awaitable[dict[str, Any]]]] = {
    "search": _search, "ask": _ask, "remember": _remember, "forget": _forget, "list_strategies": _list_strategies,
}


# streamable HTTP, inside `ragloom serve` -----------------------------------------------------------------
def http_caller(ctx: Any) -> KeyRecord:
    """The caller ``KeyRequired`` admitted for this HTTP request."""
    request = getattr(ctx, "request", None)
    who = request.scope.get("state", {}).get("caller") if request is not None else None
    if who is None:  # never reached through KeyRequired: refuse rather than guess
        raise Refused(401, "missing, unknown or revoked API key")
    return who


def http_app(rag_of: Callable[[], Any], gate: Gate, metrics: Any = None) -> tuple[Any, Any]:
    """(the ASGI app to route at /mcp, the session manager whose ``run()`` the service's lifespan enters).
    Stateless: every request carries its key and is checked on its own."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager


    server = build_server(_Late(rag_of), http_caller, metrics)
    manager = StreamableHTTPSessionManager(app=server, stateless=True, json_response=True)
    return KeyRequired(StreamableHTTPASGIApp(manager), gate, refusal=jsonrpc_refusal), manager


REFUSED = -32001  # a JSON-RPC server error code: the request was refused before the MCP server saw it


def jsonrpc_refusal(refused: Refused) -> dict[str, Any]:
    """A refusal at /mcp as a JSON-RPC error (at the HTTP status), so an MCP client shows the reason."""
    return {"jsonrpc": "2.0", "id": None, "error": {"code": REFUSED, "message": f"refused ({refused.status}): "
            f"{refused.detail}", "data": {"status": refused.status}}}


class _Late:
    """The service's ``Ragloom``, which exists only once its lifespan has started."""

    def __init__(self, rag_of: Callable[[], Any]) -> None:
        self._rag_of = rag_of

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rag_of(), name)


# stdio: `ragloom mcp` ------------------------------------------------------------------------------------
def serve_stdio(settings: Any) -> None:
    """The stdio server, acting as the principal of the key in RAGLOOM_API_KEY (checked now, and again with
    the rate limit on every call, so a revoked key stops working at once)."""
    import asyncio

    from mcp.server.stdio import stdio_server


    key = os.environ.get(KEY_VARIABLE, "")
    gate = Gate(KeyStore(settings.resolved_keys_file), settings.service_rate_per_minute,
                settings.service_auth_failures_per_minute)
    if not key:
        raise RagloomError(f"ragloom mcp: set {KEY_VARIABLE} to an API key (`ragloom keys create`); it acts as that "
                           "key's principal")
    try:
        gate.admit(key, "stdio")
    except Refused as e:
        raise RagloomError(f"ragloom mcp: {KEY_VARIABLE}: {e.detail}") from e
    load_profiles(settings.agent_profiles)  # a bad profiles file stops here, before the agent's host connects

    async def main() -> None:
        with Ragloom(settings, coalesce_queries=True, hide_schema=True) as rag:
            server = build_server(rag, lambda ctx: gate.admit(key, "stdio"))
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

    asyncio.run(main())
