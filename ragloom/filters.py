"""The metadata filter language, store-neutral: parsed into a small typed tree, checked (bound) against a
collection's property types, then handed to a store, which translates it (``ragloom.stores.weaviate.filters``).
Everything here is pure.

A filter is a JSON object (or its JSON text); keys are ANDed::

    {"status": "published"}                        exact (on a list property: has this element)
    {"status": ["draft", "published"]}            any of
    {"year": {"gte": 2020, "lt": 2024}}           range: numbers, or ISO dates ("2021-03-01", "2021-03-01T12:00Z")
    {"title": {"contains": "Neural"}}             substring
    {"title": {"contains": ["Neural", "Deep"]}}   any of these substrings
    {"not": {"status": "draft"}}                  negation of a whole filter (nestable)
    {"status": {"not": "draft"}}                  negation of one field's condition

Operators inside a field's object: ``eq``, ``in``, ``gt``, ``gte``, ``lt``, ``lte``, ``contains``, ``not``.

``contains`` is a substring test. The Weaviate store runs it as ``Like`` with ``*value*``: Weaviate's other
choice, ContainsAny/All, compares whole tokens, and ids, titles, paths and user metadata are stored with FIELD
tokenization (one token per value), so a word of a title would never match. ``Like`` follows each property's
tokenization: on FIELD properties (``title``, ``source_path``, text metadata) it is a case-sensitive substring
of the whole value; on ``heading_path`` (WORD) it matches case-insensitively. ``*`` and ``?`` in the value are
wildcards too, which can only widen a match inside the query's scope (the scope is a separate conjunct).

Core chunk fields (``document_id``, ``strategy``, ``level``, ``parent_id``, ``title``, ``source_path``,
``heading_path``) map to themselves; any other key is user metadata, stored as ``meta_<key>``
(``meta_property_name``: the one sanitizing rule ingestion and filters share). Scope is never a filter: it is
the query's ``scope`` argument, ANDed by ``scope_condition``; ``build_where`` gives the tree every store query
runs with.

``bind`` checks each condition against the collection's property types (a field no chunk has, a range on
text, a string compared with a number: each a FilterError naming the field) and converts values (ISO strings
to dates on DATE properties, numbers to text on TEXT ones, as ingestion stored them).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from ragloom.errors import FilterError
from ragloom.types import Scope

META_PREFIX = "meta_"  # user metadata key "Review Status" is stored and filtered as meta_review_status

CORE_FIELDS = {"document_id": "TEXT", "strategy": "TEXT", "level": "INT", "parent_id": "TEXT", "title": "TEXT",
               "source_path": "TEXT", "heading_path": "TEXT"}
RANGE_OPS = ("gt", "gte", "lt", "lte")
OPERATORS = ("eq", "in", "contains", "not", *RANGE_OPS)

MAX_DEPTH = 8  # nested "not"s / operator objects
MAX_CONDITIONS = 64
MAX_LIST = 256
MAX_STRING = 1000
MAX_JSON = 64_000
MAX_KEY = 64

_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\- ]*")
_KEY_JUNK = re.compile(r"[^a-z0-9_]+")
# the forms ingestion stores as dates and filters compare as dates: RFC 3339 / ISO dates and date-times
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:[Zz]|[+-]\d{2}:?\d{2})?)?")

Scalar = str | int | float | bool | datetime


@dataclass(frozen=True)
class Condition:
    """One test on one property; ``field`` is the user's key (for messages), ``prop`` the stored property.

    ``op``: eq | in (value: a list) | contains (value: a list of substrings, any matches) | gt | gte | lt | lte.
    """

    field: str
    prop: str
    op: str
    value: Any


@dataclass(frozen=True)
class AllOf:
    children: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    child: Node


Node = Condition | AllOf | Not

# a condition no chunk meets: every chunk has a non-empty document id
MATCHES_NOTHING = Condition("document_id", "document_id", "eq", "")


def meta_property_name(key: str) -> str:
    """``meta_<key>`` with the key lower-cased and reduced to [a-z0-9_]."""
    clean = _KEY_JUNK.sub("_", str(key).lower()).strip("_") or "_"
    return META_PREFIX + clean


def as_text(value: Any) -> str:
    """A scalar as text metadata stores and compares it: strings as they are, booleans as JSON writes them,
    numbers by ``str``, dates in ISO form. Ingestion and filters share it, so ``{"year": 2020}`` finds 2020."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def parse_iso_date(value: str) -> datetime | None:
    """An ISO-8601 date or date-time as an aware datetime (naive means UTC), or None if it is not one."""
    value = value.strip()
    if not _ISO_DATE.fullmatch(value):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# parsing ---------------------------------------------------------------------------------------------------


def parse_filters(spec: Mapping[str, Any] | str | bytes | None) -> Node | None:
    """Validate a filter (a dict or its JSON text) into an AST; None or empty means no filter.

    Raises FilterError naming the offending field for anything it does not understand.
    """
    if spec is None:
        return None
    if isinstance(spec, (str, bytes)):
        if len(spec) > MAX_JSON:
            raise FilterError(f"filter: JSON text of {len(spec)} characters is over the limit of {MAX_JSON}")
        if not spec.strip():
            return None
        try:
            spec = json.loads(spec)
        except (ValueError, RecursionError) as e:
            raise FilterError(f"filter: not valid JSON ({e})") from e
    if not isinstance(spec, Mapping):
        raise FilterError(f"filter: must be a JSON object of field -> condition, got {type(spec).__name__}")
    if not spec:
        return None
    return _Parser().object(spec, depth=0, path="")


class _Parser:
    def __init__(self) -> None:
        self.conditions = 0

    def object(self, spec: Mapping[str, Any], depth: int, path: str) -> Node:
        if depth > MAX_DEPTH:
            raise FilterError(f"filter{_at(path)}: nested more than {MAX_DEPTH} levels deep")
        if not spec:
            raise FilterError(f"filter{_at(path)}: empty object")
        children: list[Node] = []
        for key, condition in spec.items():
            if not isinstance(key, str):
                raise FilterError(f"filter{_at(path)}: field names must be strings, got {key!r}")
            if key == "not":
                if not isinstance(condition, Mapping):
                    raise FilterError(f"filter field 'not': expects a filter object, got {type(condition).__name__}")
                children.append(Not(self.object(condition, depth + 1, _join(path, "not"))))
            else:
                children.append(self.field(key, condition, depth, path))
        return children[0] if len(children) == 1 else AllOf(tuple(children))

    def field(self, key: str, condition: Any, depth: int, path: str) -> Node:
        name = _join(path, key)
        if len(key) > MAX_KEY or not _KEY.fullmatch(key):
            raise FilterError(f"filter field {key[:MAX_KEY]!r}: names may use letters, digits, '_', '-', '.' and "
                              f"spaces, up to {MAX_KEY} characters")
        if key in ("and", "or"):
            raise FilterError(f"filter field {key!r}: not supported; keys are ANDed, a list means any-of")
        if key.startswith("scope"):
            raise FilterError(f"filter field {key!r}: scope is the query's scope argument, not a filter")
        prop = key if key in CORE_FIELDS else meta_property_name(key)
        if isinstance(condition, Mapping):
            if depth + 1 > MAX_DEPTH:
                raise FilterError(f"filter field {name!r}: nested more than {MAX_DEPTH} levels deep")
            if not condition:
                raise FilterError(f"filter field {name!r}: empty operator object")
            parts = [self.operator(key, name, prop, op, value, depth, path) for op, value in condition.items()]
            kinds = {isinstance(p.value, datetime) for p in parts if isinstance(p, Condition) and p.op in RANGE_OPS}
            if len(kinds) > 1:
                raise FilterError(f"filter field {name!r}: a range mixes dates and numbers")
            return parts[0] if len(parts) == 1 else AllOf(tuple(parts))
        if isinstance(condition, (list, tuple)):
            return self.condition(name, Condition(key, prop, "in", _scalar_list(name, condition)))
        return self.condition(name, Condition(key, prop, "eq", _scalar(name, condition)))

    def operator(self, key: str, name: str, prop: str, op: Any, value: Any, depth: int, path: str) -> Node:
        if op not in OPERATORS:
            raise FilterError(f"filter field {name!r}: unknown operator {str(op)[:40]!r}; "
                              f"use one of {', '.join(OPERATORS)}")
        if op == "not":
            return Not(self.field(key, value, depth + 1, path))
        if op == "eq":
            return self.condition(name, Condition(key, prop, "eq", _scalar(name, value)))
        if op == "in":
            if not isinstance(value, (list, tuple)):
                raise FilterError(f"filter field {name!r}: 'in' expects a list")
            return self.condition(name, Condition(key, prop, "in", _scalar_list(name, value)))
        if op == "contains":
            values = [value] if isinstance(value, str) else value
            if not isinstance(values, (list, tuple)) or not values or not all(isinstance(v, str) for v in values):
                raise FilterError(f"filter field {name!r}: 'contains' expects a string or a non-empty list of strings")
            if len(values) > MAX_LIST:
                raise FilterError(f"filter field {name!r}: more than {MAX_LIST} values")
            return self.condition(name, Condition(key, prop, "contains", [_text(name, v) for v in values]))
        return self.condition(name, Condition(key, prop, op, _range_value(name, op, value)))

    def condition(self, name: str, condition: Condition) -> Condition:
        self.conditions += 1
        if self.conditions > MAX_CONDITIONS:
            raise FilterError(f"filter field {name!r}: more than {MAX_CONDITIONS} conditions in one filter")
        return condition


def _scalar(name: str, value: Any) -> Scalar:
    if value is None:
        raise FilterError(f"filter field {name!r}: null is not a value to compare with")
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return _number(name, value)
    if isinstance(value, str):
        return _text(name, value)
    raise FilterError(f"filter field {name!r}: unsupported value of type {type(value).__name__}")


INT64_RANGE = (-(2**63), 2**63 - 1)  # what Weaviate stores; larger ints fail deep in gRPC


def _number(name: str, value: int | float) -> int | float:
    if isinstance(value, float) and not math.isfinite(value):
        raise FilterError(f"filter field {name!r}: {value} is not a finite number")
    if isinstance(value, int) and not INT64_RANGE[0] <= value <= INT64_RANGE[1]:
        raise FilterError(f"filter field {name!r}: {str(value)[:24]}... is outside the 64-bit integer range")
    return value


def _scalar_list(name: str, values: Sequence[Any]) -> list[Scalar]:
    if not values:
        raise FilterError(f"filter field {name!r}: an empty list matches nothing")
    if len(values) > MAX_LIST:
        raise FilterError(f"filter field {name!r}: more than {MAX_LIST} values")
    out = [_scalar(name, v) for v in values]
    kinds = {_kind(v) for v in out}
    if len(kinds) > 1:
        raise FilterError(f"filter field {name!r}: a list mixes value types ({', '.join(sorted(kinds))})")
    return out


def _kind(value: Scalar) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "date" if isinstance(value, datetime) else "text"


def _range_value(name: str, op: str, value: Any) -> int | float | datetime:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _number(name, value)
    date = parse_iso_date(value) if isinstance(value, str) and len(value) <= 64 else None
    if date is None:
        raise FilterError(f"filter field {name!r}: '{op}' expects a number or an ISO date, got {str(value)[:40]!r}")
    return date


def _text(name: str, value: str) -> str:
    if len(value) > MAX_STRING:
        raise FilterError(f"filter field {name!r}: a value of {len(value)} characters is over {MAX_STRING}")
    if "\x00" in value:
        raise FilterError(f"filter field {name!r}: NUL characters are not allowed")
    return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _at(path: str) -> str:
    return f" at {path!r}" if path else ""


# checking against the schema -------------------------------------------------------------------------------


def bind(node: Node | None, property_types: Mapping[str, str] | None, *, hide_schema: bool = False) -> Node | None:
    """``node`` checked against the collection's property types (data type names such as TEXT, INT, NUMBER,
    DATE, BOOL, TEXT_ARRAY: ``VectorStore.property_types``) with values converted to them.

    ``property_types`` None (schema unknown): core fields are checked, and ISO-date strings compared with
    user metadata become dates (what ingestion does with them).

    ``hide_schema`` (the service): a condition on a field the collection lacks, or of the wrong type, becomes
    ``MATCHES_NOTHING`` instead of an error. The schema is shared by every tenant of a collection, so an
    error there would tell a caller which metadata keys *other* tenants' documents carry.
    """
    if node is None:
        return None
    if isinstance(node, AllOf):
        return AllOf(tuple(bind(c, property_types, hide_schema=hide_schema) for c in node.children))
    if isinstance(node, Not):
        return Not(bind(node.child, property_types, hide_schema=hide_schema))
    try:
        if node.prop in CORE_FIELDS:
            data_type = CORE_FIELDS[node.prop]
        elif property_types is None:
            data_type = None
        elif node.prop in property_types:
            data_type = property_types[node.prop]
        else:
            raise FilterError(f"filter field {node.field!r}: no chunk in this collection has this metadata "
                              f"(it would be stored as {node.prop})")
        return replace(node, value=_bind_value(node, data_type))
    except FilterError:
        if hide_schema and node.prop not in CORE_FIELDS:
            return MATCHES_NOTHING
        raise


def _bind_value(node: Condition, data_type: str | None) -> Any:
    name, op = node.field, node.op
    base = data_type.removesuffix("_ARRAY") if data_type else None
    if op == "contains":
        if base not in (None, "TEXT"):
            raise FilterError(f"filter field {name!r}: 'contains' works on text, this field is {data_type}")
        return node.value
    if op in RANGE_OPS:
        if base is None:
            return node.value
        wants_date = isinstance(node.value, datetime)
        if base == "DATE" and wants_date or base in ("INT", "NUMBER") and not wants_date:
            return node.value
        raise FilterError(f"filter field {name!r}: '{op}' {'a date' if wants_date else 'a number'} cannot be "
                          f"compared with this {data_type} field")
    if op == "in":
        return [_convert(name, v, base) for v in node.value]
    return _convert(name, node.value, base)


def _convert(name: str, value: Scalar, base: str | None) -> Any:
    if base is None:  # schema unknown: what ingestion would have made of it
        date = parse_iso_date(value) if isinstance(value, str) else None
        return date if date is not None else value
    if base == "TEXT":
        return as_text(value)  # what ingestion stored (ragloom.metadata)
    if base == "BOOL" and isinstance(value, bool):
        return value
    if base in ("INT", "NUMBER") and isinstance(value, (int, float)) and not isinstance(value, bool):
        if base == "INT" and not float(value).is_integer():
            raise FilterError(f"filter field {name!r}: {value} is not an integer, and this field is INT")
        return int(value) if base == "INT" else float(value)
    if base == "DATE" and isinstance(value, str):
        date = parse_iso_date(value)
        if date is not None:
            return date
    raise FilterError(f"filter field {name!r}: {str(value)[:40]!r} ({_kind(value)}) cannot be compared with "
                      f"this {base} field")


# the tree every query runs with ---------------------------------------------------------------------------


def scope_condition(scope: Scope) -> Node:
    """`scope_path` is one of the scope's visible paths: its own and every ancestor's, never a sibling's.

    scope_path uses FIELD tokenization, so equality is exact ("acme" never matches "acme-corp").
    """
    return Condition("scope", "scope_path", "in", list(scope.visible_paths()))


def combine(*nodes: Node | None) -> Node | None:
    """AND of the given nodes, skipping None."""
    present = [n for n in nodes if n is not None]
    if not present:
        return None
    return present[0] if len(present) == 1 else AllOf(tuple(present))


def build_where(scope: Scope, filters: Mapping[str, Any] | str | Node | None = None, *extra: Node | None) -> Node:
    """The tree every store query runs with: the scope, AND the user's filters, AND any extra nodes."""
    user = filters if isinstance(filters, (Condition, AllOf, Not)) else bind(parse_filters(filters), None)
    scoped = scope_condition(scope)
    rest = [n for n in (user, *extra) if n is not None]
    return AllOf((scoped, *rest)) if rest else scoped
