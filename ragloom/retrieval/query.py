"""The typed query: what one retrieval (or answer) is asked, every field already checked.

A ``Query`` is made by ``ragloom.query.parse_query`` at every door (CLI, query job, HTTP service, MCP, evaluation,
Python API); a retriever's ``search`` runs one without checking anything again. The field checks that need no
registry live here, so a retriever called directly with text (``retriever.search("...", k=5)``) checks its input
the same way.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragloom.errors import QueryError
from ragloom.filters import AllOf, Condition, Node, Not, parse_filters
from ragloom.types import Scope

MAX_K = 200
MAX_QUERY_CHARS = 4000
MAX_NAMESPACES = 32
MAX_NAMESPACE_CHARS = 64
DEFAULT_STRATEGY = "hybrid"
DEFAULT_K = 5


@dataclass(frozen=True)
class Query:
    """One query. ``options``: the strategy's and post-processing options the caller set (checked against the
    declarations; defaults are the retriever's). ``namespaces``: None = all; ``()`` = skip retrieval.
    ``transforms``: None = the settings' default. The ``generation*`` / ``token_budget`` / ``use_cache`` fields
    matter to ``ask`` only."""

    text: str
    strategy: str = DEFAULT_STRATEGY
    k: int = DEFAULT_K
    chunking: str | None = None  # None: the strategy's own default collection
    scope: Scope = field(default_factory=Scope)
    filters: Node | None = None
    filter_spec: Any = None  # the filter as the caller wrote it (JSON-like), for result metadata
    options: Mapping[str, Any] = field(default_factory=dict)
    transforms: tuple[str, ...] | None = None
    transform_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    exclude_dynamic: bool = False
    namespaces: tuple[str, ...] | None = None
    generation: str | None = None
    generation_options: Mapping[str, Any] = field(default_factory=dict)
    token_budget: int | None = None
    use_cache: bool = True
    requested_strategy: str = ""  # the name asked for, when unknown_strategy="fallback" replaced it
    profile: str = ""  # the agent profile that filled the fields the request left out
    exclude_tools: tuple[str, ...] = ()  # injected results of these tools are left out

    @property
    def skips_retrieval(self) -> bool:
        """An empty namespace list: the caller asked for no retrieval (an agent without a namespace)."""
        return self.namespaces == ()

    def replace(self, **changes: Any) -> Query:
        return dataclasses.replace(self, **changes)


def check_text(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise QueryError("the query must be a non-empty string")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"the query has {len(text)} characters, over the limit of {MAX_QUERY_CHARS}")
    return text.strip()


def check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise QueryError(f"k must be an integer from 1 to {MAX_K}, got {k!r:.40}")
    return k


def check_scope(scope: Any) -> Scope:
    if scope is None or isinstance(scope, str):
        return Scope.from_path(scope)
    if isinstance(scope, Scope):
        return scope
    raise QueryError(f"scope must be a Scope or a path like 'tenant/user', got {type(scope).__name__}")


def check_filters(spec: Any) -> tuple[Node | None, Any]:
    """(the parsed filter tree, the filter as written) from a dict, its JSON text or an already parsed tree."""
    if isinstance(spec, (Condition, AllOf, Not)):
        return spec, str(spec)
    node = parse_filters(spec)
    return node, describe(spec) if node is not None else None


def check_namespaces(namespaces: Any) -> tuple[str, ...] | None:
    """None: every namespace; a list (empty: skip retrieval) of names of 1-64 characters."""
    if namespaces is None:
        return None
    if isinstance(namespaces, str) or not isinstance(namespaces, Sequence):
        raise QueryError("namespaces must be a list of names (empty: skip retrieval), or left out for all")
    if len(namespaces) > MAX_NAMESPACES:
        raise QueryError(f"namespaces: at most {MAX_NAMESPACES}, got {len(namespaces)}")
    out = []
    for name in namespaces:
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAMESPACE_CHARS or "\x00" in name:
            raise QueryError(f"namespaces: each is a name of 1 to {MAX_NAMESPACE_CHARS} characters, got {name!r:.80}")
        out.append(name)
    return tuple(dict.fromkeys(out))


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise QueryError(f"{name} must be true or false, got {value!r:.40}")
    return value


def describe(spec: Any) -> Any:
    """A filter as JSON-like data for result metadata (text stays text)."""
    if spec is None or isinstance(spec, str):
        return spec
    try:
        return json.loads(json.dumps(spec, default=str))
    except (TypeError, ValueError):
        return str(spec)


def as_mapping(name: str, value: Any) -> Mapping[str, Any]:
    """A JSON object given as a mapping or as JSON text ("" and None: empty)."""
    if value is None:
        return {}
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise QueryError(f"{name} are not valid JSON: {e.msg} (at character {e.pos})") from e
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise QueryError(f"{name} must be a JSON object of name: value, got {type(value).__name__}")
    return value
