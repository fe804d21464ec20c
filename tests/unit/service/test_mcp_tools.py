"""The MCP tools' input schemas are the HTTP API's request models: every query field has its place there."""

from __future__ import annotations

from ragloom.query import FIELDS
from ragloom.service.mcp_server import TOOLS, tool_list
from ragloom.service.models import AskRequest, QueryRequest

ASK_ONLY = {"generation", "generation_options", "token_budget", "use_cache"}


def test_search_and_ask_take_every_query_field() -> None:
    schemas = {tool.name: tool.input_schema for tool in tool_list()}
    assert set(schemas) == {"search", "ask", "remember", "forget", "list_strategies"} == set(TOOLS)
    search, ask = set(schemas["search"]["properties"]), set(schemas["ask"]["properties"])
    assert search == set(QueryRequest.model_fields) and ask == set(AskRequest.model_fields)
    fields = set(FIELDS) - {"text"}  # the request's text is "query"
    assert fields - ASK_ONLY <= search and "query" in search
    assert fields <= ask
    assert schemas["search"]["properties"]["k"]["maximum"] == 200
    assert schemas["list_strategies"]["properties"] == {}
