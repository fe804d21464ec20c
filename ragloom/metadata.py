"""How user and file metadata is stored, the same for every tenant: declared keys typed, every other key text.

Every tenant's chunks share one collection per chunking, so a property's type is a fact about all of them. A
type fixed by whoever writes a key first lets one tenant refuse another's writes and learn the keys others
use (issue #29). Here no value decides a type:

- **declared keys** have the type the operator gives them (``DECLARED_TYPES``, plus ``RAGLOOM_METADATA_TYPES``);
  a value that does not fit is the writer's own error (``MetadataError``) naming its key and value;
- **every other key** is ``TEXT_ARRAY``: a scalar is stored as a list of one text (``as_text``), a list as its
  elements' texts. Any value fits, so no write can clash with another's, and equality filters still work
  (on a list property Weaviate's Equal means "has this element"). Ranges need a declared key.

Caps bound what one item may add (keys, key length, value size); the store bounds the properties of a
collection (``max_properties``). Pure: no store is touched here. docs/design/metadata.md has the reasoning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from ragloom.errors import ConfigError
from ragloom.filters import META_PREFIX, as_text, meta_property_name, parse_iso_date
from ragloom.settings import Settings, parse_metadata_types

UNDECLARED = "TEXT_ARRAY"  # the type of every key the operator did not declare
RESERVED = ("title", "source_path")  # metadata keys that fill core properties of the chunk instead

# Keys ragloom itself writes (injection, chunkers, summaries, attachments): typed, and not counted against a
# caller's keys-per-item cap.
SYSTEM_TYPES: dict[str, str] = {
    "dynamic": "BOOL", "injected_at": "DATE", "expires_at": "DATE", "namespace": "TEXT",
    "page": "INT", "embed_truncated": "BOOL", "pages_without_text": "INT_ARRAY", "pages_ocr": "INT_ARRAY",
    "attached_to": "TEXT",
    "section_key": "TEXT", "section_chunks": "TEXT_ARRAY", "summary_method": "TEXT",
    "tool": "TEXT", "agent_id": "TEXT",  # an injected tool result: which tool, which agent (ragloom.dynamic)
}
# What the file parsers read from files (ragloom.parsing): the same keys a sidecar or an injected item may set.
FILE_TYPES: dict[str, str] = {
    "author": "TEXT", "created": "DATE", "modified": "DATE", "last_modified_by": "TEXT",
    "date": "DATE", "from": "TEXT", "to": "TEXT_ARRAY", "cc": "TEXT_ARRAY",
}
DECLARED_TYPES: dict[str, str] = {**SYSTEM_TYPES, **FILE_TYPES}


class MetadataError(ConfigError):
    """A metadata value or key this deployment does not store; names the writer's own key and value only."""


@dataclass(frozen=True)
class MetadataLayout:
    """Which metadata keys are typed, and the caps on what one item may carry.

    ``declared``: user key -> type, on top of ``DECLARED_TYPES`` (an operator may re-type a file key, not a
    system one)."""

    declared: Mapping[str, str] = field(default_factory=dict)
    max_keys: int = 64
    max_key_chars: int = 64
    max_value_chars: int = 2048
    max_properties: int = 512
    _types: dict[str, str] = field(init=False, repr=False, compare=False)  # stored property name -> type

    def __post_init__(self) -> None:
        core = sorted(k for k in self.declared if k in RESERVED)
        if core:
            raise ConfigError(f"metadata keys {core} are core fields of a chunk, not metadata")
        clash = sorted(k for k, t in self.declared.items() if k in SYSTEM_TYPES and SYSTEM_TYPES[k] != t)
        if clash:
            raise ConfigError(f"metadata keys {clash} are ragloom's own; their types cannot be changed")
        types = {meta_property_name(k): t for k, t in {**FILE_TYPES, **self.declared, **SYSTEM_TYPES}.items()}
        object.__setattr__(self, "_types", types)

    @classmethod
    def from_settings(cls, settings: Settings) -> MetadataLayout:
        return cls(declared=parse_metadata_types(settings.metadata_types), max_keys=settings.metadata_max_keys,
                   max_key_chars=settings.metadata_max_key_chars, max_value_chars=settings.metadata_max_value_chars,
                   max_properties=settings.metadata_max_properties)

    @property
    def property_types(self) -> dict[str, str]:
        """Stored property name -> type of every declared key (``meta_author`` -> TEXT, ...)."""
        return dict(self._types)

    def type_of(self, prop: str) -> str:
        """The type of stored property ``prop`` (``meta_<key>``): declared, else ``UNDECLARED``."""
        return self._types.get(prop, UNDECLARED)

    def is_declared(self, prop: str) -> bool:
        return prop in self._types

    def prepare(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """``{meta_<key>: value as stored}`` for an item's metadata, nested mappings flattened
        (``{"a": {"b": 1}}`` -> ``meta_a_b``); MetadataError naming the first key that breaks a cap or whose
        value a declared type cannot hold. ``None``, NaN and empty lists are left out."""
        flat = flatten(metadata)
        own = [k for k in flat if meta_property_name(k) not in SYSTEM_PROPS]
        if len(own) > self.max_keys:
            raise MetadataError(f"metadata: {len(own)} keys, over the limit of {self.max_keys} per item "
                                "(RAGLOOM_METADATA_MAX_KEYS)")
        out: dict[str, Any] = {}
        for key, value in flat.items():
            if len(key) > self.max_key_chars:
                raise MetadataError(f"metadata key {key[:40]!r}...: {len(key)} characters, over the limit of "
                                    f"{self.max_key_chars} (RAGLOOM_METADATA_MAX_KEY_CHARS)")
            prop = meta_property_name(key)
            stored = self.store_value(key, value, self.type_of(prop))
            if stored is None:
                continue
            size = sum(len(as_text(v)) for v in stored) if isinstance(stored, list) else len(as_text(stored))
            if size > self.max_value_chars:
                raise MetadataError(f"metadata {key!r}: a value of {size} characters, over the limit of "
                                    f"{self.max_value_chars} (RAGLOOM_METADATA_MAX_VALUE_CHARS)")
            out[prop] = stored
        return out

    def store_value(self, key: str, value: Any, type_name: str) -> Any:
        """``value`` as a property of ``type_name`` holds it; None when nothing is to be stored."""
        try:
            return coerce(value, type_name)
        except ValueError as e:
            raise MetadataError(f"metadata {key!r}: {_shown(value)} {e}; {key!r} is declared "
                                f"{type_name} (docs/design/metadata.md)") from e


SYSTEM_PROPS = frozenset(meta_property_name(k) for k in SYSTEM_TYPES)


def flatten(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """User metadata with nested mappings joined into one key (``"a.b"`` shown, ``meta_a_b`` stored);
    the reserved keys (``title``, ``source_path``) and None values left out."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif value is not None:
            out[prefix] = value

    for key, value in metadata.items():
        if key not in RESERVED:
            walk(str(key), value)
    return out


def as_date(value: Any) -> datetime | None:
    """A datetime, date or ISO date string as an aware datetime (naive means UTC); None for anything else."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    return parse_iso_date(value) if isinstance(value, str) else None


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and not math.isfinite(value))


def coerce(value: Any, type_name: str) -> Any:
    """``value`` stored losslessly as ``type_name`` (None: nothing to store); ValueError saying what it is not.

    TEXT holds any scalar (``as_text``); an array type holds a scalar as a list of one."""
    if type_name.endswith("_ARRAY"):
        items = list(value) if isinstance(value, list | tuple | set | frozenset) else [value]
        scalar = type_name.removesuffix("_ARRAY")
        stored = [coerce(v, scalar) for v in items if _present(v)]
        return stored or None
    if isinstance(value, list | tuple | set | frozenset | Mapping):
        raise ValueError("is not a single value")
    if not _present(value):
        return None
    if type_name == "TEXT":
        return as_text(value)
    if type_name == "BOOL" and isinstance(value, bool):
        return value
    if type_name == "NUMBER" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if type_name == "INT" and not isinstance(value, bool) and isinstance(value, int | float):
        if float(value).is_integer() and -(2**63) <= int(value) < 2**63:
            return int(value)
    if type_name == "DATE":
        parsed = as_date(value)
        if parsed is not None:
            return parsed
    wanted = {"BOOL": "true or false", "NUMBER": "a number", "INT": "a whole number",
              "DATE": "an ISO 8601 date"}.get(type_name, type_name)
    raise ValueError(f"is not {wanted}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def stored_key(prop: str) -> str:
    """The metadata key a stored property came from, for messages (``meta_review_status`` -> review_status)."""
    return prop.removeprefix(META_PREFIX)
