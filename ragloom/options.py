"""Declared retrieval options: each strategy's knobs with their default, allowed values and one line of help.

A strategy lists its options as ``declared_options = {"alpha": Option(0.5, min=0, max=1, help="...")}``;
the retriever template checks every given value against its declaration once (type, choices, range), so
strategies read ``options[...]`` without re-checking. The same declarations drive ``ragloom strategies``,
the README's options table, and the parsing of ``--option key=value`` text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragloom.errors import QueryError, RetrievalError

_KINDS = (bool, int, float, str, tuple, dict)
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


@dataclass(frozen=True)
class Option:
    """One option: ``default`` (its type is the option's type unless ``kind`` says otherwise), ``help`` (one
    line), ``choices`` (the allowed values; for a list option, of each item; or a function returning them, for
    a registry that grows after the declaration), ``min``/``max`` (inclusive
    bounds; of each item for a list option, of each value for a mapping; ``exclusive_min`` makes the lower one
    strict), ``of`` (the item type of a list option, the value type of a mapping option: its keys are text; a
    mapping without ``of`` takes any values), ``min_items`` and ``max_items``. A default of None allows None."""

    default: Any
    help: str = ""
    choices: tuple[Any, ...] | Callable[[], tuple[Any, ...]] | None = None
    min: float | None = None
    max: float | None = None
    exclusive_min: bool = False
    kind: type | None = None
    of: type | None = None
    min_items: int = 0
    max_items: int | None = None

    def __post_init__(self) -> None:
        if self.type not in _KINDS:
            raise RetrievalError(f"Option kind must be one of {[k.__name__ for k in _KINDS]}, got {self.type!r}")

    @property
    def allowed_values(self) -> tuple[Any, ...] | None:
        """The choices as they stand now (a registry's names are read at each check)."""
        return self.choices() if callable(self.choices) else self.choices

    @property
    def type(self) -> type:
        if self.kind is not None:
            return self.kind
        if isinstance(self.default, bool):
            return bool
        if isinstance(self.default, (list, tuple)):
            return tuple
        if isinstance(self.default, Mapping):
            return dict
        return type(self.default)

    # checking -------------------------------------------------------------------------------------------
    def check(self, owner: str, name: str, value: Any) -> Any:
        """``value`` in the option's own type (ints widen to float, lists become tuples), or a RetrievalError
        naming the option and what it allows."""
        if value is None and self.default is None:
            return None
        kind = self.type
        if kind is tuple:
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise self._error(owner, name, value)
            items = tuple(self._scalar(owner, name, item, self.of or str, whole=value) for item in value)
            too_many = self.max_items is not None and len(items) > self.max_items
            if len(items) < self.min_items or too_many or (self.choices is not None and len(set(items)) != len(items)):
                raise self._error(owner, name, value)
            return items
        if kind is dict:
            if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
                raise self._error(owner, name, value)
            if self.of is None:
                return dict(value)
            return {key: self._scalar(owner, name, item, self.of, whole=value) for key, item in value.items()}
        return self._scalar(owner, name, value, kind, whole=value)

    def _scalar(self, owner: str, name: str, value: Any, kind: type, whole: Any) -> Any:
        if kind is bool:
            ok = isinstance(value, bool)
        elif kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            value = float(value) if ok else value
        else:
            ok = isinstance(value, kind)
        if not ok or (self.choices is not None and value not in (self.allowed_values or ())):
            raise self._error(owner, name, whole)
        if kind in (int, float):
            low_ok = self.min is None or (value > self.min if self.exclusive_min else value >= self.min)
            if not low_ok or (self.max is not None and value > self.max):
                raise self._error(owner, name, whole)
        return value

    def _error(self, owner: str, name: str, value: Any) -> QueryError:
        return QueryError(f"{owner}: option {name}={value!r} is not allowed; {name} takes {self.allowed()}")

    # describing -----------------------------------------------------------------------------------------
    def allowed(self) -> str:
        """What the option takes, in words: ``relative_score | ranked``, ``0 to 1``, ``list of dense, bm25``."""
        kind = self.type
        if kind is tuple:
            what = self._values(self.of or str) or _noun(self.of or str)
            counts = [f"at least {self.min_items}"] if self.min_items else []
            counts += [f"at most {self.max_items}"] if self.max_items is not None else []
            return f"a list of {what}" + (f" ({', '.join(counts)})" if counts else "")
        if kind is dict:
            what = f" of name: {self._values(self.of) or _noun(self.of)}" if self.of is not None else ""
            return f"a JSON object{what}" + (" or null" if self.default is None else "")
        out = self._values(kind) or _noun(kind)
        return out + (" or null" if self.default is None else "")

    def _values(self, kind: type) -> str:
        if self.choices is not None:
            return " | ".join(str(c) for c in self.allowed_values or ())
        if kind is bool:
            return "true | false"
        if kind in (int, float) and (self.min is not None or self.max is not None):
            noun = "integer" if kind is int else "number"
            if self.min is not None and self.max is not None and not self.exclusive_min:
                return f"{noun} {_num(self.min)} to {_num(self.max)}"
            parts = []
            if self.min is not None:
                parts.append(f"{'>' if self.exclusive_min else '>='} {_num(self.min)}")
            if self.max is not None:
                parts.append(f"<= {_num(self.max)}")
            return f"{noun} {' and '.join(parts)}"
        return ""

    def default_text(self) -> str:
        return format_value(self.default)

    # parsing text (CLI, environment) ------------------------------------------------------------------
    def parse(self, owner: str, name: str, text: str) -> Any:
        """The value ``text`` stands for (``key=value`` on a command line), checked."""
        return self.check(owner, name, self._parse(text, self.type))

    def _parse(self, text: str, kind: type) -> Any:
        raw = text.strip()
        if kind is bool:
            lowered = raw.lower()
            return True if lowered in _TRUE else False if lowered in _FALSE else raw
        if kind is tuple:
            if raw.startswith("["):
                return _json_or(raw)
            return tuple(self._parse(part, self.of or str) for part in raw.split(",") if part.strip())
        if raw.lower() in ("null", "none") and self.default is None:
            return None
        if kind is dict:
            if raw.startswith("{") or self.of is None:
                return _json_or(raw)
            pairs = [part.partition(":") for part in raw.split(",") if part.strip()]  # name:value,name:value
            if not all(sep for _, sep, _ in pairs):
                return raw
            return {key.strip(): self._parse(text, self.of) for key, _, text in pairs}
        if kind in (int, float):
            try:
                return int(raw) if kind is int else float(raw)
            except ValueError:
                return raw
        return raw


def _json_or(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _noun(kind: type) -> str:
    return {int: "any integer", float: "any number", str: "any text", bool: "true | false"}.get(kind, kind.__name__)


def format_value(value: Any) -> str:
    """A value as a user would type it (JSON-like: true, null, lists)."""
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, str):
        return value
    return json.dumps(value)


def check_options(owner: str, declared: Mapping[str, Option], given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` checked against ``declared``; an unknown name is an error that lists the known ones."""
    out = {}
    for name, value in given.items():
        option = declared.get(name)
        if option is None:
            raise QueryError(f"{owner}: unknown option {name!r:.80}; options: {', '.join(sorted(declared)) or 'none'}")
        out[name] = option.check(owner, name, value)
    return out


def option_defaults(declared: Mapping[str, Option]) -> dict[str, Any]:
    return {name: option.default for name, option in declared.items()}


def parse_option_pairs(owner: str, declared: Mapping[str, Option], pairs: Sequence[str]) -> dict[str, Any]:
    """``["alpha=0.3", "lanes=dense,bm25"]`` -> checked values, each parsed by its option's type."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise QueryError(f"{owner}: option {pair!r:.80} should look like key=value")
        option = declared.get(name)
        if option is None:
            raise QueryError(f"{owner}: unknown option {name!r:.80}; options: {', '.join(sorted(declared)) or 'none'}")
        out[name] = option.parse(owner, name, text)
    return out
