"""Every prompt ragloom sends, as versioned templates. Change a template's text and bump its version: the
answer cache keys on ``key`` (name, version and a hash of the text), so old answers stop matching."""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

from ragloom.errors import LLMError
from ragloom.types import sha256_hex


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    version: int
    system: str
    user: str
    schema: dict[str, Any] | None = None  # structured steps: the JSON the reply must have

    @property
    def key(self) -> str:
        return f"{self.name}@v{self.version}:{sha256_hex(self.system + chr(31) + self.user)[:10]}"

    def fields(self) -> set[str]:
        return {f for _, f, _, _ in string.Formatter().parse(self.system + self.user) if f}

    def render(self, **values: Any) -> list[dict[str, str]]:
        """Chat messages with ``values`` filled in; a missing or unknown value is a programming error."""
        expected = self.fields()
        if set(values) != expected:
            raise LLMError(f"prompt {self.name}: needs {sorted(expected)}, got {sorted(values)}")
        messages = []
        if self.system:
            messages.append({"role": "system", "content": self.system.format(**values)})
        messages.append({"role": "user", "content": self.user.format(**values)})
        return messages


# Length caps bound what a grammar-constrained server (llama.cpp, vLLM) can generate, so a small model cannot run
# a JSON string into max_tokens; endpoints that ignore them are bounded by max_tokens and the lenient parser.
MAX_QUERY_CHARS = 200
MAX_LIST_ITEM_CHARS = 160


def string_list_schema(key: str, n: int = 8) -> dict[str, Any]:
    """``{key: [at most n short strings]}``."""
    return {"type": "object", "additionalProperties": False, "required": [key],
            "properties": {key: {"type": "array", "maxItems": n,
                                 "items": {"type": "string", "maxLength": MAX_LIST_ITEM_CHARS}}}}


# Room for a reply within QUERY_SCHEMA's caps: a token is at least one character, and the grammar allows a little
# white space around the JSON, so a schema-bound reply can never be cut at max_tokens (a 96-token budget was: a
# small model that filled the 200 characters with short tokens ran out and the hop failed).
QUERY_REPLY_TOKENS = MAX_QUERY_CHARS + 64



def list_reply_tokens(n: int) -> int:
    """Room for a reply within ``string_list_schema(key, n)``'s caps (as ``QUERY_REPLY_TOKENS``)."""
    return n * (MAX_LIST_ITEM_CHARS + 8) + 64


QUERY_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["query"],
                "properties": {"query": {"type": "string", "maxLength": MAX_QUERY_CHARS}}}
MAX_CLAIMS = 4

REFORMULATE = PromptTemplate(
    "reformulate", 1,
    "You rewrite questions into search queries for a document search engine.",
    "Rewrite the question as one clear, self-contained search query that keeps every name and number. "
    'Reply with JSON: {{"query": "..."}}\n\nQuestion: {question}',
    QUERY_SCHEMA,
)

MULTI_QUERY = PromptTemplate(
    "multi_query", 1,
    "You write search queries for a document search engine.",
    "Write {n} different search queries that would each find passages answering the question: vary the "
    'wording and the angle. Reply with JSON: {{"queries": ["...", "..."]}}\n\nQuestion: {question}',
    string_list_schema("queries"),
)

HYDE = PromptTemplate(
    "hyde", 1,
    "You write short factual passages.",
    "Write a passage of two to four sentences that answers the question the way a reference text would. "
    "Write only the passage.\n\nQuestion: {question}",
)

STEP_BACK = PromptTemplate(
    "step_back", 1,
    "You write search queries for a document search engine.",
    "Write one more general question about the concepts behind this question, whose answer gives the "
    'background needed to answer it. Reply with JSON: {{"query": "..."}}\n\nQuestion: {question}',
    QUERY_SCHEMA,
)

DECOMPOSE = PromptTemplate(
    "decompose", 1,
    "You break complex questions into simple ones.",
    "Break the question into at most {n} simpler sub-questions, each answerable on its own, in the order "
    'they should be answered. Reply with JSON: {{"questions": ["...", "..."]}}\n\nQuestion: {question}',
    string_list_schema("questions"),
)

FOLLOW_UP = PromptTemplate(
    "follow_up", 1,
    "You plan the next search for questions that need several steps.",
    "Question: {question}\n\nPassages found so far:\n{passages}\n\nWrite one search query for the information "
    "still missing to answer the question, e.g. about an entity the passages lead to. If the passages already "
    'answer it, reply with an empty query. Reply with JSON: {{"query": "..."}}',
    QUERY_SCHEMA,
)

SUMMARIZE_SECTION = PromptTemplate(
    "summarize_section", 1,
    "You write short factual summaries of document sections for a search index.",
    "Summarize this section in at most {words} words. Keep names, numbers and the main facts; add nothing that "
    "is not in the section.\n\nSection:\n{section}",
)

_ANSWER_RULES = ("Answer the question using only the numbered passages below. After each sentence, cite the "
                 "passages that support it by number in square brackets, like [1] or [2][3]. If the passages "
                 "do not contain the answer, say that you do not know.")

ANSWER_SIMPLE = PromptTemplate(
    "answer_simple", 1,
    _ANSWER_RULES,
    "Passages:\n\n{context}\n\nQuestion: {question}",
)

ANSWER_COT = PromptTemplate(
    "answer_cot", 1,
    _ANSWER_RULES + " First reason step by step about what each passage says; then write a final line that "
                    "starts with 'Answer:' followed by the answer with its citations.",
    "Passages:\n\n{context}\n\nQuestion: {question}",
)

CHECK_CLAIMS = PromptTemplate(
    "check_claims", 1,
    "You check whether an answer is supported by passages.",
    "Passages:\n\n{context}\n\nQuestion: {question}\n\nDraft answer: {draft}\n\nList each claim the draft "
    "makes (at most four) and whether the passages support it. Reply with JSON: "
    '{{"claims": [{{"claim": "...", "supported": true}}]}}',
    {"type": "object", "additionalProperties": False, "required": ["claims"], "properties": {"claims": {
        "type": "array", "maxItems": MAX_CLAIMS, "items": {
            "type": "object", "additionalProperties": False, "required": ["claim", "supported"],
            "properties": {"claim": {"type": "string", "maxLength": MAX_LIST_ITEM_CHARS},
                           "supported": {"type": "boolean"}}}}}},
)

REVISE = PromptTemplate(
    "revise", 1,
    _ANSWER_RULES,
    "Passages:\n\n{context}\n\nQuestion: {question}\n\nDraft answer: {draft}\n\nThese claims of the draft are not "
    "supported by the passages: {unsupported}\nRewrite the answer without them, citing passages as [n].",
)

ALL_TEMPLATES = (REFORMULATE, MULTI_QUERY, HYDE, STEP_BACK, DECOMPOSE, FOLLOW_UP, SUMMARIZE_SECTION,
                 ANSWER_SIMPLE, ANSWER_COT, CHECK_CLAIMS, REVISE)
