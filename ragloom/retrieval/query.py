"""The typed query: what one retrieval (or answer) is asked, every field already checked.

A ``Query`` is made by ``ragloom.query.parse_query`` at every door (CLI, query job, HTTP service, MCP, evaluation,
Python API); a retriever's ``search`` runs one without checking anything again. The field checks that need no
registry live here, so a retriever called directly with text (``retriever.search("...", k=5)``) checks its input
the same way.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragloom.errors import QueryError
from ragloom.filters import AllOf, Condition, Node, Not, parse_filters
from ragloom.types import Scope

MAX_K = 200
MAX_QUERY_CHARS = 4000
MAX_NAMESPACES = 32
MAX_NAMESPACE_CHARS = 64
MAX_EXCLUDED_DOCUMENTS = 200
DEFAULT_STRATEGY = "hybrid"
DEFAULT_K = 5


@dataclass(frozen=True)
class Declared:
    """How a ``Query`` field shows at the doors: its help, the JSON type a request gives it (``wire``), its
    bounds in the request schema, its command-line flag, and the check that turns what was given into the
    field's value. A field with a declaration is accepted by every door (the HTTP and MCP request schema, the
    command line and the Python API are made from these); ``check`` None means ``ragloom.query.parse_query``
    decides the value itself (it needs a registry, or another field)."""

    help: str
    wire: Any
    check: Callable[[Any], Any] | None = None
    ask_only: bool = False  # matters to answers only (HTTP/MCP: the ask request; CLI: `ragloom ask`)
    flag: str = ""  # the command line's flag; "": --the-field-name; "-": not on the command line
    bounds: Mapping[str, Any] = field(default_factory=dict)  # ge, le, max_length, ... of the request schema


def declare(help: str, wire: Any, check: Callable[[Any], Any] | None = None, **how: Any) -> dict[str, Declared]:
    """A ``Query`` field's ``metadata``: see ``Declared``."""
    return {"declared": Declared(help, wire, check, **how)}


@dataclass(frozen=True)
class Query:
    """One query. ``options``: the strategy's and post-processing options the caller set (checked against the
    declarations; defaults are the retriever's). ``namespaces``: None = all; ``()`` = skip retrieval.
    ``transforms``: None = the settings' default. The ``generation*`` / ``token_budget`` / ``use_cache`` fields
    matter to ``ask`` only.

    Adding a query parameter: a field here with its ``declare(...)`` (help, request type, check), read by the
    strategy or step it is for. Every door takes it from the declaration."""

    text: str
    strategy: str = field(default=DEFAULT_STRATEGY, metadata=declare(
        "the retrieval strategy (`ragloom strategies` lists them); another name is an error unless "
        "unknown_strategy is fallback", str))
    k: int = field(default=DEFAULT_K, metadata=declare(
        "results to return", int, lambda v: check_k(v), flag="-k", bounds={"ge": 1, "le": MAX_K}))
    chunking: str | None = field(default=None, metadata=declare(  # None: the strategy's own default collection
        "whose collection: recursive | semantic | hierarchical | headered; default: the strategy's own", str))
    scope: Scope = field(default_factory=Scope, metadata=declare(
        "tenant/user[/chat[/agent]]; default: shared only (HTTP and MCP: inside the key's own scope)", str,
        lambda v: check_scope(v)))
    filters: Node | None = field(default=None, metadata=declare(
        "metadata filter in the filter language (a JSON object)", dict[str, Any], flag="--filter"))
    filter_spec: Any = None  # the filter as the caller wrote it (JSON-like), for result metadata
    options: Mapping[str, Any] = field(default_factory=dict, metadata=declare(
        "strategy and post-processing options, each checked against its declaration (`ragloom strategies`, "
        "GET /v1/strategies)", dict[str, Any]))
    transforms: tuple[str, ...] | None = field(default=None, metadata=declare(
        "query transforms (reformulate, multi_query, hyde, step_back, decompose, prf); default "
        "RAGLOOM_LLM_TRANSFORMS", list[str]))
    transform_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, metadata=declare(
        'per transform, its options (bounded), e.g. {"multi_query": {"n": 4}}', dict[str, dict[str, Any]]))
    exclude_dynamic: bool = field(default=False, metadata=declare(
        "leave out injected (dynamic) items", bool, lambda v: check_bool("exclude_dynamic", v)))
    namespaces: tuple[str, ...] | None = field(default=None, metadata=declare(
        "only documents of these namespaces; absent: all; an empty list: skip retrieval", list[str],
        lambda v: check_namespaces(v)))
    generation: str | None = field(default=None, metadata=declare(
        "simple | cot | reflect; default RAGLOOM_LLM_GENERATION", str, ask_only=True))
    generation_options: Mapping[str, Any] = field(default_factory=dict, metadata=declare(
        'the generation strategy\'s options (bounded), e.g. {"rounds": 2} for reflect', dict[str, Any],
        ask_only=True))
    token_budget: int | None = field(default=None, metadata=declare(
        "context tokens passed to the model; default RAGLOOM_LLM_CONTEXT_TOKENS", int, ask_only=True,
        bounds={"ge": 1}))
    use_cache: bool = field(default=True, metadata=declare(
        "read and write the answer cache", bool, lambda v: check_bool("use_cache", v), ask_only=True,
        flag="--no-cache"))
    requested_strategy: str = ""  # the name asked for, when unknown_strategy="fallback" replaced it
    profile: str = field(default="", metadata=declare(  # the agent profile that filled the fields left out
        "an agent profile (`ragloom profiles`, GET /v1/profiles): its fields fill what the request leaves out",
        str, bounds={"max_length": 64}))
    exclude_tools: tuple[str, ...] = field(default=(), metadata=declare(
        "leave out injected results of these tools", list[str], lambda v: check_tools(v)))
    exclude_documents: tuple[str, ...] = field(default=(), metadata=declare(
        "leave out these documents (by document_id), e.g. the ones an agent has already read", list[str],
        lambda v: check_document_ids(v)))

    @property
    def skips_retrieval(self) -> bool:
        """An empty namespace list: the caller asked for no retrieval (an agent without a namespace)."""
        return self.namespaces == ()

    def replace(self, **changes: Any) -> Query:
        return dataclasses.replace(self, **changes)


@functools.cache
def declared_fields(ask: bool = True) -> Mapping[str, tuple[Declared, Any]]:
    """The ``Query`` fields the doors accept, in declaration order: name -> (declaration, default).
    ``ask`` False leaves out the fields that matter to answers only. Read once (the parser asks on every query)."""
    out = {}
    for f in dataclasses.fields(Query):
        declared = f.metadata.get("declared")
        if declared is None or (declared.ask_only and not ask):
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        out[f.name] = (declared, default)
    return types.MappingProxyType(out)


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


def check_name_list(field_name: str, what: str, value: Any, most: int, max_chars: int) -> tuple[str, ...]:
    """A list of names (or comma-separated text), each 1 to ``max_chars`` characters, at most ``most`` of them,
    duplicates dropped; None: none."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, Sequence) or not all(isinstance(v, str) and 0 < len(v) <= max_chars for v in value):
        raise QueryError(f"{field_name} must be a list of {what} (1 to {max_chars} characters each)")
    if len(value) > most:
        raise QueryError(f"{field_name}: at most {most}, got {len(value)}")
    return tuple(dict.fromkeys(value))


def check_tools(value: Any) -> tuple[str, ...]:
    return check_name_list("exclude_tools", "tool names", value, 32, 64)


def check_document_ids(value: Any) -> tuple[str, ...]:
    return check_name_list("exclude_documents", "document ids", value, MAX_EXCLUDED_DOCUMENTS, 1000)


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
