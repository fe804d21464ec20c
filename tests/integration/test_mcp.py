"""ragloom from an agent: the MCP server driven by the SDK's own client over stdio (`ragloom mcp`) and over
streamable HTTP (`ragloom serve`, /mcp), real servers below; agent profiles; a tool result remembered in one turn
and retrieved in the next.

Nothing is ingested: every item is a remembered tool result, in a collection prefix of this module's own.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from polling import free_port, ragloom_serve

from ragloom.service.keys import KeyStore
from ragloom.service.mcp_server import TOOLS
from ragloom.settings import REPO_ROOT

STRATEGY = "recursive"
RATE_PER_MINUTE = 60
PROFILES = """
helper:
  description: a chat helper that remembers what its tools said
  strategy: dense
  k: 3
  options: {abstain: false, rerank: false, dedup: false}
  remember:
    weather: {ttl_seconds: 600}
    calendar: {}
quiet:
  description: an agent without retrieval
  namespaces: []
"""
TTL_SECONDS = 4


@dataclasses.dataclass
class Served:
    url: str
    env: dict[str, str]
    keys: dict[str, str]
    keystore: KeyStore
    log: Path


@pytest.fixture(scope="module")
def served(settings, module_weaviate_store_factory, module_neo4j_store_factory, tmp_path_factory):
    root = tmp_path_factory.mktemp("mcp")
    tag = uuid.uuid4().hex[:10]
    prefix, graph_ns = f"TestMcp{tag}", f"test_mcp_{tag}"
    module_weaviate_store_factory(prefix), module_neo4j_store_factory(graph_ns)  # cleaned up after the module
    (root / "agents.yaml").write_text(PROFILES)
    keystore = KeyStore(root / "keys.json")
    made = {name: keystore.create("acme", user) for name, user in
            (("alice", "alice"), ("bob", "bob"), ("revoked", "alice"), ("burst", "alice"))}
    keystore.revoke(made["revoked"][1].key_id)
    keys = {name: key for name, (key, _record) in made.items()}
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "RAGLOOM_COLLECTION_PREFIX": prefix,
           "RAGLOOM_GRAPH_NAMESPACE": graph_ns, "RAGLOOM_CHUNKINGS": STRATEGY, "RAGLOOM_GRAPH_CHUNKINGS": STRATEGY,
           "RAGLOOM_SERVICE_KEYS_FILE": str(root / "keys.json"), "RAGLOOM_AGENT_PROFILES": str(root / "agents.yaml"),
           "RAGLOOM_SERVICE_RATE_PER_MINUTE": str(RATE_PER_MINUTE), "RAGLOOM_SERVICE_SWEEP_SECONDS": "3600",
           "RAGLOOM_LLM_MAX_TOKENS": "16", "RAGLOOM_LLM_TIMEOUT_SECONDS": "150", "PYTHONUNBUFFERED": "1"}
    port = free_port()
    log = root / "service.log"
    with ragloom_serve(env, port, log, REPO_ROOT) as url:
        yield Served(url, env, keys, keystore, log)


def _http(served: Served, key: str) -> Client:
    return Client(streamable_http_client(f"{served.url}/mcp", http_client=httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}"}, timeout=120)))


def _stdio(served: Served, key: str) -> Client:
    return Client(StdioServerParameters(command=sys.executable, args=["-m", "ragloom", "mcp"], cwd=str(REPO_ROOT),
                                        env={**served.env, "RAGLOOM_API_KEY": key}), read_timeout_seconds=180)


def _out(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def _error(result: Any) -> str:
    assert result.is_error, result.content[0].text
    return result.content[0].text


async def _every_tool(client: Client, chat: str) -> None:
    async with client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == set(TOOLS)
        # the schemas are the HTTP API's request models: the Query fields, bounded as there
        assert listed["search"].input_schema["properties"]["k"]["maximum"] == 200
        assert "profile" in listed["search"].input_schema["properties"]
        strategies = _out(await client.call_tool("list_strategies", {}))
        assert {"multi_query", "hyde", "hybrid"} <= {s["name"] for s in strategies["strategies"]}
        assert {p["name"] for p in strategies["profiles"]} == {"helper", "quiet"}
        kept = _out(await client.call_tool("remember", {
            "text": "The weather tool said: the Zanzibar ferry is cancelled by a gale.", "scope": chat,
            "tool": "weather", "profile": "helper"}))
        found = _out(await client.call_tool("search", {"query": "Zanzibar ferry gale", "scope": chat,
                                                       "profile": "helper"}))
        assert found["metadata"]["strategy"] == "dense" and found["metadata"]["profile"] == "helper"
        hit = [i for i in found["items"] if i["document_id"] == kept["item_id"]]
        assert hit and hit[0]["metadata"]["meta_tool"] == "weather" and hit[0]["metadata"]["meta_agent_id"] == "helper"
        answer = _out(await client.call_tool("ask", {"query": "Is the Zanzibar ferry running?", "scope": chat,
                                                     "profile": "helper", "use_cache": False}))
        assert "answer" in answer and answer["context"]
        assert _out(await client.call_tool("forget", {"item_id": kept["item_id"]}))["deleted_chunks"] >= 1
        assert "no dynamic item" in _error(await client.call_tool("forget", {"item_id": kept["item_id"]}))
        # a refusal is a tool error that says why
        assert "does not remember results of tool 'shell'" in _error(await client.call_tool("remember", {
            "text": "rm -rf", "scope": chat, "tool": "shell", "profile": "helper"}))
        assert "outside this key's scope" in _error(await client.call_tool("search", {"query": "x",
                                                                                      "scope": "acme/bob"}))
        assert "invalid input for search" in _error(await client.call_tool("search", {"query": "x", "k": 0}))


def test_the_sdk_client_lists_and_calls_every_tool_over_http(served):
    anyio.run(_every_tool, _http(served, served.keys["alice"]), "acme/alice/http-chat")


def test_the_sdk_client_lists_and_calls_every_tool_over_stdio(served):
    anyio.run(_every_tool, _stdio(served, served.keys["alice"]), "acme/alice/stdio-chat")


def test_stdio_without_a_key_or_with_a_revoked_one_does_not_start(served):
    for key in ("", served.keys["revoked"]):
        env = {**served.env, "RAGLOOM_API_KEY": key}
        done = subprocess.run([sys.executable, "-m", "ragloom", "mcp"], env=env, cwd=REPO_ROOT, input="",
                              capture_output=True, text=True, timeout=120)
        assert done.returncode != 0
        assert "RAGLOOM_API_KEY" in done.stderr


def test_http_mcp_without_a_key_with_a_revoked_key_and_above_the_rate(served):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with httpx.Client(base_url=served.url, timeout=30) as http:
        r = http.post("/mcp", json=body, headers=headers)
        assert r.status_code == 401 and "missing, unknown or revoked" in r.json()["error"]["message"]
        r = http.post("/mcp", json=body, headers={**headers, "Authorization": f"Bearer {served.keys['revoked']}"})
        assert r.status_code == 401
        burst = {**headers, "Authorization": f"Bearer {served.keys['burst']}"}
        codes = [http.post("/mcp", json=body, headers=burst).status_code for _ in range(RATE_PER_MINUTE + 5)]
        assert codes[0] == 200 and codes[-1] == 429
        # the bucket is the key's, shared with /v1: the same key is limited there too
        assert http.post("/v1/query", json={"query": "x"}, headers=burst).status_code == 429

    async def refused() -> str:
        async with _http(served, served.keys["revoked"]) as client:
            await client.list_tools()
        return "connected"

    with pytest.raises(BaseException) as refusal:
        anyio.run(refused)
    assert "refused (401): missing, unknown or revoked API key" in " ".join(_messages(refusal.value))


def _messages(error: BaseException) -> list[str]:
    """Every message in an exception (group) and its causes: the SDK client raises from a task group."""
    out = [f"{type(error).__name__}: {error}"]
    for inner in getattr(error, "exceptions", ()):
        out += _messages(inner)
    if error.__cause__ is not None:
        out += _messages(error.__cause__)
    return out


def test_a_profile_without_namespaces_skips_retrieval_and_says_so(served):
    async def flow() -> dict[str, Any]:
        async with _http(served, served.keys["alice"]) as client:
            return _out(await client.call_tool("search", {"query": "anything", "profile": "quiet"}))

    found = anyio.run(flow)
    assert found["items"] == [] and found["metadata"]["skipped"] is True
    assert "namespaces=[]" in found["metadata"]["skip_reason"]


def test_two_turn_agent_flow_remembers_within_the_chat_only_and_until_the_ttl(served):
    chat, sibling = "acme/alice/trip", "acme/alice/other-trip"
    fact = "The calendar tool said: the Oslo fjord tour leaves at 07:45 from pier nine."

    async def turn_one() -> str:
        async with _http(served, served.keys["alice"]) as client:
            kept = _out(await client.call_tool("remember", {"text": fact, "scope": chat, "tool": "calendar",
                                                            "profile": "helper", "ttl_seconds": TTL_SECONDS}))
            return kept["item_id"]

    async def turn_two(scope: str, **more: Any) -> list[str]:
        async with _http(served, served.keys["alice"]) as client:
            found = _out(await client.call_tool("search", {"query": "When does the Oslo fjord tour leave?",
                                                           "scope": scope, "profile": "helper", **more}))
            return [i["document_id"] for i in found["items"]]

    item = anyio.run(turn_one)
    started = time.monotonic()
    assert item in anyio.run(turn_two, chat)
    assert item not in anyio.run(turn_two, sibling)
    assert item not in anyio.run(functools.partial(turn_two, chat, exclude_tools=["calendar"]))
    assert item in anyio.run(functools.partial(turn_two, chat, exclude_tools=["weather"]))
    time.sleep(max(0.0, TTL_SECONDS + 1 - (time.monotonic() - started)))
    assert item not in anyio.run(turn_two, chat)  # expired: never returned, swept or not


def test_the_http_api_takes_the_same_profiles_and_tools(served):
    headers = {"Authorization": f"Bearer {served.keys['bob']}"}
    with httpx.Client(base_url=served.url, headers=headers, timeout=60) as http:
        r = http.post("/v1/inject", json={"text": "shell said: ok", "scope": "acme/bob/c1", "tool": "shell",
                                          "profile": "helper"})
        assert r.status_code == 400 and "does not remember results of tool 'shell'" in r.json()["detail"]
        r = http.post("/v1/inject", json={"text": "The weather tool said: hail over Tromsø at noon.",
                                          "scope": "acme/bob/c1/planner", "tool": "weather", "profile": "helper"})
        assert r.status_code == 201, r.text
        item = r.json()
        assert item["scope"] == "acme/bob/c1/planner" and item["expires_at"]  # the profile's TTL for weather
        r = http.post("/v1/query", json={"query": "hail over Tromsø", "scope": "acme/bob/c1/planner",
                                         "profile": "helper", "k": 2})
        body = r.json()
        assert r.status_code == 200 and body["metadata"]["strategy"] == "dense" and body["metadata"]["k"] == 2
        assert item["item_id"] in [i["document_id"] for i in body["items"]]
        # an agent scope: the chat (without the agent) does not see it
        r = http.post("/v1/query", json={"query": "hail over Tromsø", "scope": "acme/bob/c1", "profile": "helper"})
        assert item["item_id"] not in [i["document_id"] for i in r.json()["items"]]
        assert {p["name"] for p in http.get("/v1/profiles").json()} == {"helper", "quiet"}
        assert "multi_query" in {s["name"] for s in http.get("/v1/strategies").json()}
        r = http.post("/v1/query", json={"query": "x", "profile": "nobody"})
        assert r.status_code == 400 and "unknown profile 'nobody'" in r.json()["detail"]


def test_the_python_api_takes_the_same_profiles(settings, weaviate_store_factory, tmp_path):
    from ragloom.api import Ragloom
    from ragloom.errors import QueryError
    from ragloom.types import Scope

    (tmp_path / "agents.yaml").write_text(PROFILES)
    vectors = weaviate_store_factory()
    s = dataclasses.replace(settings, collection_prefix=vectors.prefix, chunkings=(STRATEGY,),
                            agent_profiles=str(tmp_path / "agents.yaml"))
    chat = Scope("acme", "alice", "py-chat")
    with Ragloom(s, vectors=vectors) as rag:
        item = rag.remember([STRATEGY], "The weather tool said: fog in Lerwick harbour.", chat, tool="weather",
                            profile="helper")
        assert item.expires_at is not None  # the profile's TTL
        with pytest.raises(QueryError, match="does not remember results of tool 'shell'"):
            rag.remember([STRATEGY], "ok", chat, tool="shell", profile="helper")
        result = rag.query("fog in Lerwick", scope=chat, profile="helper")
        assert result.metadata.strategy == "dense" and result.metadata.k == 3
        assert item.item_id in [i.document_id for i in result.items]
        assert rag.query("fog in Lerwick", scope=chat, profile="helper", exclude_dynamic=True).items == []
        assert rag.query("fog", scope=chat, profile="quiet").metadata.details["skipped"] is True
        assert rag.delete_item([STRATEGY], item.item_id, Scope("acme", "alice")) >= 1


def test_the_graph_traversal_options_reach_graph_rag_through_mcp(served):
    """max_hops, the relation filter and the context format are declared options: the MCP door checks them like
    every other (a bad value is a tool error naming the bound) and hands them to graph_rag."""
    async def flow() -> tuple[dict[str, Any], str]:
        chat = "acme/alice/graph-options"
        async with _http(served, served.keys["alice"]) as client:
            _out(await client.call_tool("remember", {"text": "Rafael Moreno leads the Data Services team.",
                                                     "scope": chat, "tool": "weather", "profile": "helper"}))
            options = {"max_hops": 2, "relations": ["svo", "LEAD"], "context_format": "json", "abstain": False}
            found = _out(await client.call_tool("search", {"query": "Who leads the Data Services team?",
                                                           "scope": chat, "strategy": "graph_rag",
                                                           "options": options}))
            refused = _error(await client.call_tool("search", {"query": "x", "strategy": "graph_rag",
                                                               "options": {"max_hops": 0}}))
            return found, refused

    found, refused = anyio.run(flow)
    used = found["metadata"]["options"]
    assert found["metadata"]["strategy"] == "graph_rag"
    assert (used["max_hops"], list(used["relations"]), used["context_format"]) == (2, ["svo", "LEAD"], "json")
    assert "max_hops=0 is not allowed" in refused and "1 to 20" in refused
