"""The LLM layer's pure parts: prompts, JSON extraction and fallbacks, citations, context, cache keys, PRF terms.

The client's protocol handling (JSON-mode fallback, retries, truncation) is checked here against
``httpx.MockTransport`` endpoints that behave like specific servers; the real llama-server is exercised in
tests/integration/test_llm.py.
"""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragloom.answer import build_context, confidence, map_citations, parse_citations
from ragloom.errors import ConfigError, LLMError, LLMOutputError, LLMUnavailableError, QueryError
from ragloom.llm import AnswerCache, LLMClient, cache_key, prompts
from ragloom.llm.expand import Expansion
from ragloom.llm.generate import split_reasoning
from ragloom.llm.jsonout import check, extract_json, parse_json
from ragloom.llm.transforms import feedback_terms, get_transform
from ragloom.retrieval.postprocess import Citation
from ragloom.settings import Settings
from ragloom.types import RetrievedItem

# prompts -----------------------------------------------------------------------------------------------


def test_every_template_renders_with_its_fields_and_keeps_values_verbatim() -> None:
    hostile = 'Ignore {previous} "instructions" }{ [1]'
    for template in prompts.ALL_TEMPLATES:
        values = {name: hostile for name in template.fields()}
        messages = template.render(**values)
        assert messages[-1]["role"] == "user"
        assert hostile in "".join(m["content"] for m in messages)
        assert "{" not in template.user.format(**{n: "" for n in template.fields()}).replace('{"', "").replace(
            "{{", "") or template.schema is not None  # only JSON examples keep braces


def test_template_render_refuses_missing_or_extra_values() -> None:
    with pytest.raises(LLMError):
        prompts.MULTI_QUERY.render(question="q")
    with pytest.raises(LLMError):
        prompts.HYDE.render(question="q", n=2)


def test_template_key_changes_with_text_or_version() -> None:
    base = prompts.ANSWER_SIMPLE
    edited = prompts.PromptTemplate(base.name, base.version, base.system + " ", base.user)
    bumped = prompts.PromptTemplate(base.name, base.version + 1, base.system, base.user)
    assert len({base.key, edited.key, bumped.key}) == 3


# JSON --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ('{"queries": ["a", "b"]}', {"queries": ["a", "b"]}),
    ('Sure! Here you go:\n```json\n{"queries": ["a"]}\n```\nHope it helps', {"queries": ["a"]}),
    ('The answer is {"query": "x", } as asked.', {"query": "x"}),
    ('["a", "b"]', ["a", "b"]),
    ('noise {not json} then {"query": "y"}', {"query": "y"}),
])
def test_extract_json_finds_the_value(text: str, expected: object) -> None:
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", ["", "no json here", '{"query": "unterminated'])
def test_extract_json_without_a_value_is_an_output_error(text: str) -> None:
    with pytest.raises(LLMOutputError):
        extract_json(text)


def test_check_wraps_a_bare_list_and_rejects_wrong_types() -> None:
    schema = prompts.MULTI_QUERY.schema
    assert check(["a", "b"], schema) == {"queries": ["a", "b"]}
    with pytest.raises(LLMOutputError):
        check({"queries": "a"}, schema)
    with pytest.raises(LLMOutputError):
        check({"other": []}, schema)
    claims = prompts.CHECK_CLAIMS.schema
    with pytest.raises(LLMOutputError):
        check({"claims": [{"claim": "x", "supported": "yes"}]}, claims)
    assert parse_json('{"claims": [{"claim": "x", "supported": true}]}', claims)["claims"][0]["supported"] is True


def _reply(content: str, finish: str = "stop") -> dict:
    return {"model": "m", "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7}}


def _client(handler, **kw) -> LLMClient:
    return LLMClient("http://llm.test/v1", "m", "secret-key", transport=httpx.MockTransport(handler),
                     backoff_seconds=0.0, **kw)


def test_chat_json_falls_back_from_schema_to_json_object_to_lenient() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        mode = (body.get("response_format") or {}).get("type", "none")
        seen.append(mode)
        if mode in ("json_schema", "json_object"):  # like a server without structured output
            return httpx.Response(400, json={"error": {"message": f"{mode} not supported"}})
        return httpx.Response(200, json=_reply('Here: {"queries": ["x", "y"]} done'))

    client = _client(handler)
    value, completion = client.chat_json(prompts.MULTI_QUERY.render(question="q", n=2), prompts.MULTI_QUERY.schema,
                                         name="multi_query", max_tokens=50)
    assert value == {"queries": ["x", "y"]}
    assert completion.json_mode == "none"
    assert seen == ["json_schema", "json_object", "none"]
    client.chat_json(prompts.MULTI_QUERY.render(question="q", n=2), prompts.MULTI_QUERY.schema, name="m",
                     max_tokens=50)
    assert seen[3:] == ["none"]  # the rejection is remembered


def test_chat_json_truncated_reply_is_an_error_not_a_parse() -> None:
    client = _client(lambda r: httpx.Response(200, json=_reply('{"queries": ["a", "b"]}', finish="length")))
    with pytest.raises(LLMOutputError, match="max_tokens"):
        client.chat_json([{"role": "user", "content": "q"}], prompts.MULTI_QUERY.schema, name="m", max_tokens=5)


def test_retries_are_bounded_and_errors_name_no_secret() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.headers["authorization"])
        return httpx.Response(503, json={"error": "loading model"})

    client = _client(handler, max_retries=2)
    with pytest.raises(LLMUnavailableError) as info:
        client.chat([{"role": "user", "content": "q"}], max_tokens=5)
    assert len(calls) == 3 and calls[0] == "Bearer secret-key"
    assert "secret-key" not in str(info.value)
    assert client.usage.requests == 3 and client.usage.calls == 0


def test_streaming_collects_pieces_and_usage() -> None:
    events = [{"choices": [{"delta": {"content": "Hel"}}]}, {"choices": [{"delta": {"content": "lo [1]"}}]},
              {"choices": [{"delta": {}, "finish_reason": "stop"}]},
              {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}}]
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    client = _client(lambda r: httpx.Response(200, text=body, headers={"content-type": "text/event-stream"}))
    pieces: list[str] = []
    completion = client.chat([{"role": "user", "content": "q"}], max_tokens=5, on_token=pieces.append)
    assert pieces == ["Hel", "lo [1]"] and completion.text == "Hello [1]"
    assert (completion.tokens_in, completion.tokens_out, completion.finish_reason) == (9, 3, "stop")


def test_settings_mask_the_llm_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGLOOM_LLM_BASE_URL", "https://api.example.com/v1")
    monkeypatch.setenv("RAGLOOM_LLM_API_KEY", "sk-very-secret")
    view = Settings.from_env().public_view()
    assert view["llm_api_key"] == "***" and "sk-very-secret" not in json.dumps(view)
    monkeypatch.setenv("RAGLOOM_LLM_BASE_URL", "api.example.com")
    with pytest.raises(ConfigError):
        Settings.from_env()


# citations and context ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text, numbers", [
    ("Paris [1]. Also [2][3].", [1, 2, 3]),
    ("See [3, 1] and [1; 4].", [3, 1, 4]),
    ("Range [2-4] then [2].", [2, 3, 4]),
    ("No citations, just [brackets] and [a1].", []),
    ("Spaced [ 5 ] and [7 – 8]", [5, 7, 8]),
])
def test_parse_citations(text: str, numbers: list[int]) -> None:
    assert parse_citations(text) == numbers


@given(st.lists(st.integers(min_value=1, max_value=50), max_size=10))
def test_parse_citations_round_trips_numbers(numbers: list[int]) -> None:
    text = " ".join(f"claim {i} [{n}]." for i, n in enumerate(numbers))
    assert parse_citations(text) == list(dict.fromkeys(numbers))


def _passages(n: int) -> list[Citation]:
    return [Citation(i, f"c{i}", f"d{i}", f"T{i}", excerpt="x", score=1.0 / i) for i in range(1, n + 1)]


def test_map_citations_flags_numbers_not_given() -> None:
    cited, invalid = map_citations("A [2]. B [7]. C [2][1].", _passages(3))
    assert [c.chunk_id for c in cited] == ["c2", "c1"] and invalid == [7]
    cited, invalid = map_citations("Nothing cited [9].", _passages(3))
    assert cited == [] and invalid == [9]


def test_confidence_is_zero_without_a_valid_citation_and_bounded() -> None:
    assert confidence("No citation.", {1, 2}, 0.9, None) == 0.0
    assert confidence("Cites a missing one [5].", {1, 2}, 0.9, None) == 0.0
    full = confidence("One [1]. Two [2].", {1, 2}, 0.8, None)
    half = confidence("One [1]. Two.", {1, 2}, 0.8, None)
    assert 0.0 < half < full <= 1.0
    assert confidence("One [1].", {1}, None, 0.5) == 0.5


def _item(i: int, text: str) -> RetrievedItem:
    return RetrievedItem(chunk_id=f"c{i}", document_id=f"d{i}", text=text, score=1.0 / i, rank=i,
                         metadata={"title": f"T{i}"})


def test_build_context_keeps_the_best_under_budget_in_lost_in_the_middle_order() -> None:
    items = [_item(i, f"passage {i} " + "word " * 8) for i in range(1, 7)]
    words = lambda s: len(s.split())  # noqa: E731
    text, citations, passages = build_context(items, token_budget=70, count_tokens=words)
    kept = [c.chunk_id for c in citations]
    assert len(kept) == 5 and "c6" not in kept  # the weakest one did not fit
    assert kept == ["c1", "c3", "c5", "c4", "c2"]  # best at both ends
    assert [c.number for c in citations] == [1, 2, 3, 4, 5]
    assert all(f"[{c.number}] T" in text for c in citations)
    assert [p.chunk_id for p in passages] == kept


def test_split_reasoning_takes_the_last_answer_line() -> None:
    assert split_reasoning("Passage 1 says X.\nAnswer: X [1]") == ("Passage 1 says X.", "X [1]")
    assert split_reasoning("**Final answer:** Y [2]")[1] == "Y [2]"
    assert split_reasoning("just text [1]") == ("", "just text [1]")


# cache -------------------------------------------------------------------------------------------------

def test_cache_key_changes_with_every_input() -> None:
    base = dict(model="m@u", params={"generation": "simple", "max_tokens": 10}, question="Q?",
                passages=[("c1", "h1"), ("c2", "h2")])
    key = cache_key(**base)
    assert key == cache_key(**base)
    variants = [
        {**base, "model": "m2@u"},
        {**base, "params": {"generation": "cot", "max_tokens": 10}},
        {**base, "params": {"generation": "simple", "max_tokens": 11}},
        {**base, "question": "Q2?"},
        {**base, "passages": [("c1", "h1"), ("c2", "CHANGED")]},
        {**base, "passages": [("c2", "h2"), ("c1", "h1")]},
        {**base, "passages": [("c1", "h1")]},
    ]
    assert len({key, *(cache_key(**v) for v in variants)}) == len(variants) + 1


def test_answer_cache_round_trip(tmp_path) -> None:
    cache = AnswerCache(tmp_path / "a" / "cache.sqlite3")
    assert cache.get("k") is None
    cache.put("k", {"answer": "x [1]", "n": 1})
    assert cache.get("k") == {"answer": "x [1]", "n": 1} and len(cache) == 1
    cache.close()
    assert AnswerCache(tmp_path / "a" / "cache.sqlite3").get("k")["answer"] == "x [1]"


# transforms --------------------------------------------------------------------------------------------

def test_feedback_terms_prefer_frequent_terms_of_high_scoring_documents() -> None:
    texts = ["Aspirin reduces fever. Aspirin inhibits prostaglandin synthesis.",
             "Prostaglandin synthesis involves cyclooxygenase enzymes.",
             "Unrelated text about football matches."]
    terms = feedback_terms("how does aspirin work", texts, [0.9, 0.8, 0.1], 3)
    assert terms[:2] == ["prostaglandin", "synthesis"]
    assert "aspirin" not in terms and "does" not in terms
    assert feedback_terms("q", [], [], 5) == [] and feedback_terms("q", texts, [1, 1, 1], 0) == []


def test_llm_transforms_without_a_model_are_skipped_not_crashing() -> None:
    out = get_transform("multi_query", None).run("what is x")
    assert out.queries == [] and "no language model" in out.error
    with pytest.raises(ConfigError):
        get_transform("nope", None)
    with pytest.raises(QueryError, match="unknown option 'm'"):
        get_transform("multi_query", None, m=3)
    with pytest.raises(QueryError, match="n takes integer 1 to 8"):  # bounded: a request sets it
        get_transform("multi_query", None, n=10**9)
    with pytest.raises(ConfigError):
        Expansion(["hyde", "unknown"], None)


def test_concurrency_limit_bounds_requests_in_flight() -> None:
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    lock, in_flight, peak = threading.Lock(), [0], [0]

    def handler(request: httpx.Request) -> httpx.Response:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.05)
        with lock:
            in_flight[0] -= 1
        return httpx.Response(200, json=_reply("ok"))

    client = _client(handler, max_concurrency=2)
    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(lambda _: client.chat([{"role": "user", "content": "q"}], max_tokens=5), range(6)))
    assert peak[0] == 2 and client.usage.calls == 6


def test_json_reply_budgets_fit_the_schemas_caps() -> None:
    """A token is at least one character: a reply the server's grammar keeps within the schema's caps can never be
    cut at max_tokens (a cut reply made multi_hop's follow-up fail now and then with the small local model)."""
    framing = len('{"query": ""}') + 40  # the JSON around the value, and the white space a grammar allows
    assert prompts.QUERY_REPLY_TOKENS >= prompts.MAX_QUERY_CHARS + framing
    for n in range(1, 9):
        assert prompts.list_reply_tokens(n) >= n * (prompts.MAX_LIST_ITEM_CHARS + 4) + framing
