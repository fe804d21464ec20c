"""JSON from model output (pure): strict parse, then lenient extraction, then a check against a small schema.

Lenient extraction takes the first JSON object or array in the text (after code fences, prose, or a
trailing comma the model added). The schema check covers the subset ragloom's prompts use: ``type``
(object, array, string, integer, number, boolean), ``properties``, ``required`` and ``items``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ragloom.errors import LLMOutputError

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,), "integer": (int,),
                                       "number": (int, float), "boolean": (bool,)}


def extract_json(text: str) -> Any:
    """The JSON value in ``text``: the whole text, else a fenced block, else the first object or array."""
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    for candidate in candidates:
        for attempt in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
            try:
                return json.loads(attempt)
            except ValueError:
                pass
    decoder = json.JSONDecoder()
    for source in (text, _TRAILING_COMMA.sub(r"\1", text)):
        for match in re.finditer(r"[{\[]", source):
            try:
                value, _ = decoder.raw_decode(source, match.start())
            except ValueError:
                continue
            return value
    raise LLMOutputError(f"no JSON value in the model's reply: {_excerpt(text)}")


def check(value: Any, schema: Mapping[str, Any], path: str = "$") -> Any:
    """``value`` if it fits ``schema``; an object expected but a bare list given is wrapped when the schema has
    exactly one array property (small models often answer ``[...]`` for ``{"queries": [...]}``)."""
    expected = schema.get("type")
    if expected == "object" and isinstance(value, list):
        arrays = [k for k, v in schema.get("properties", {}).items() if v.get("type") == "array"]
        if len(arrays) == 1 and len(schema.get("properties", {})) == 1:
            value = {arrays[0]: value}
    if expected is not None:
        types = _TYPES.get(expected)
        if types is None:
            raise LLMOutputError(f"schema type {expected!r} at {path} is not supported")
        if not isinstance(value, types) or (expected in ("integer", "number") and isinstance(value, bool)):
            raise LLMOutputError(f"the model's JSON has {type(value).__name__} at {path}, expected {expected}")
    if isinstance(value, dict):
        missing = [k for k in schema.get("required", []) if k not in value]
        if missing:
            raise LLMOutputError(f"the model's JSON lacks {missing} at {path}")
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                value[key] = check(value[key], sub, f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        value = [check(v, schema["items"], f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def parse_json(text: str, schema: Mapping[str, Any] | None = None) -> Any:
    value = extract_json(text)
    return check(value, schema) if schema is not None else value


def _excerpt(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return repr(flat[:limit] + ("..." if len(flat) > limit else ""))
