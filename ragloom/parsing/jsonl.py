"""JSON Lines records: one document per line (`id` or BEIR's `_id`, `title`, `text`, `metadata`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ragloom.errors import ParseError


@dataclass(frozen=True)
class JsonlRecord:
    line: int  # 1-based line number in the file
    record_id: str
    title: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


def read_jsonl(text: str) -> list[JsonlRecord | ParseError]:
    """Every non-blank line as a record, or the ParseError that says why that line is unusable.

    A bad line never hides the good ones; duplicate ids keep the first line.
    """
    results: list[JsonlRecord | ParseError] = []
    seen: dict[str, int] = {}
    # split on "\n" only: JSON strings may hold U+2028 and other characters str.splitlines() breaks on
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = _record(number, line)
        except ParseError as e:
            results.append(e)
            continue
        if record.record_id in seen:
            results.append(ParseError("malformed", f"line {number}: duplicate id {record.record_id!r} "
                                                   f"(first on line {seen[record.record_id]})"))
            continue
        seen[record.record_id] = number
        results.append(record)
    return results


def _record(number: int, line: str) -> JsonlRecord:
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as e:
        raise ParseError("malformed", f"line {number}: invalid JSON: {e.msg} at column {e.colno}") from e
    if not isinstance(raw, dict):
        raise ParseError("malformed", f"line {number}: expected a JSON object, got {type(raw).__name__}")
    record_id = raw.get("id", raw.get("_id"))
    if isinstance(record_id, bool) or not isinstance(record_id, str | int) or str(record_id).strip() == "":
        raise ParseError("malformed", f"line {number}: missing or invalid 'id' (or '_id')")
    text = raw.get("text")
    if not isinstance(text, str):
        raise ParseError("malformed", f"line {number}: missing or non-string 'text'")
    if not text.strip():
        raise ParseError("empty", f"line {number}: 'text' is blank")
    title = raw.get("title") or ""
    if not isinstance(title, str):
        raise ParseError("malformed", f"line {number}: 'title' must be a string")
    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ParseError("malformed", f"line {number}: 'metadata' must be an object")
    return JsonlRecord(line=number, record_id=str(record_id), title=title, text=text, metadata=metadata)
