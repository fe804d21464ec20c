"""The one query parser: every door (CLI, query job, HTTP service, MCP, evaluation runner, Python API) turns what
it was given into a typed ``Query`` here, under one policy.

- A field, strategy, chunking, transform, generation or option nobody declares is a ``QueryError`` naming the
  known ones. ``unknown_strategy="fallback"`` (an explicit choice) runs ``dense`` instead, with a warning in the
  result.
- Options are checked once, against the ``Option`` declarations of the strategy (and post-processing), of each
  transform and of the generation strategy: type, choices and bounds, so no request asks for unbounded work.
- ``namespaces`` absent means all; an empty list means "skip retrieval".
- No field or option names a file or a server path: those are settings.
- ``profile`` names an agent profile (ragloom.profiles): its fields fill what the request leaves out; what the
  request sets wins, options merged key by key.

Adding a query parameter: a field on ``ragloom.retrieval.query.Query`` with its declaration (help, request type,
check), or an ``Option`` on the strategy that reads it. The doors are made from the declarations.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ragloom.chunking import available_chunkers
from ragloom.errors import QueryError, RagloomError
from ragloom.llm import available_generations, available_transforms, generation_options, transform_options
from ragloom.options import Option, check_options, parse_option_pairs
from ragloom.profiles import Profiles, apply_profile
from ragloom.retrieval import available_strategies, strategy_class
from ragloom.retrieval.base import FALLBACK_STRATEGY
from ragloom.retrieval.query import (
    DEFAULT_STRATEGY,
    Query,
    as_mapping,
    check_filters,
    check_text,
    declared_fields,
)

log = logging.getLogger(__name__)

UNKNOWN_STRATEGY = ("error", "fallback")
MAX_TOKEN_BUDGET = 32_000
# every field a door accepts, with its help: the query text, the declared ``Query`` fields, and the fallback policy
FIELDS: dict[str, str] = {
    "text": "the question or search text",
    **{name: declared.help for name, (declared, _default) in declared_fields().items()},
    "unknown_strategy": "error (default) | fallback: an unknown strategy runs dense with a warning",
}


def parse_query(fields: Mapping[str, Any] | None = None, /, *, option_pairs: Sequence[str] = (),
                profiles: Profiles | None = None, **more: Any) -> Query:
    """A checked ``Query`` from ``fields`` (and keyword fields, which win): JSON-like values as a request body,
    a job's config or the Python API give them (``filters`` and ``options`` may also be JSON text,
    ``transforms`` comma-separated text). ``option_pairs``: ``key=value`` text from a command line (they win
    over ``options``). ``profiles``: where a ``profile`` field is looked up.

    A declared field with its own check is checked by it; the others below need a registry or another field."""
    given = {**(fields or {}), **more}
    unknown = sorted(set(given) - set(FIELDS))
    if unknown:
        raise QueryError(f"unknown query field(s) {unknown}; fields: {', '.join(FIELDS)}")
    profile_name = given.pop("profile", None) or ""
    if profile_name:
        if not isinstance(profile_name, str):
            raise QueryError("profile must be a name")
        given = apply_profile((profiles or Profiles()).get(profile_name), given)
    text = check_text(given.get("text"))
    checked = {name: declared.check(given[name]) for name, (declared, _default) in declared_fields().items()
               if declared.check is not None and name in given}
    strategy, requested, warning = _strategy(given.get("strategy"), given.get("unknown_strategy"))
    generation = _generation(given.get("generation"))
    filters, filter_spec = check_filters(given.get("filters"))
    query = Query(
        text=text, strategy=strategy, chunking=check_chunking(given.get("chunking")),
        filters=filters, filter_spec=filter_spec,
        options=_options(strategy, given.get("options"), option_pairs, lenient=bool(warning)),
        transforms=check_transforms(given.get("transforms")),
        transform_options=_transform_options(given.get("transform_options")), generation=generation,
        generation_options=_checked("generation_options", f"generation {generation or '(any)'}",
                                    generation_options(generation), given.get("generation_options")),
        token_budget=_token_budget(given.get("token_budget")), requested_strategy=requested,
        profile=profile_name, **checked)
    if warning:
        log.warning(warning)
    return query


def load_profiles(path: Any) -> Profiles:
    """The agent profiles of the file at ``path`` (RAGLOOM_AGENT_PROFILES; empty: none), each profile's fields
    checked by this parser, so a bad one stops the start with the file and the profile named."""
    return Profiles.load(path or None, lambda fields: parse_query(fields, text="profile check"))


def fallback_warning(query: Query) -> str:
    """The warning a result carries when ``unknown_strategy="fallback"`` replaced an unknown strategy."""
    if not query.requested_strategy or query.requested_strategy == query.strategy:
        return ""
    return (f"unknown retrieval strategy {query.requested_strategy!r} (available: "
            f"{', '.join(available_strategies())}); used {query.strategy}")


def _strategy(name: Any, policy: Any) -> tuple[str, str, str]:
    """(the strategy to run, the one asked for when it was replaced, a warning)."""
    name = DEFAULT_STRATEGY if name is None or name == "" else name
    policy = policy or "error"
    if policy not in UNKNOWN_STRATEGY:
        raise QueryError(f"unknown_strategy={policy!r:.40}: choose from {', '.join(UNKNOWN_STRATEGY)}")
    if not isinstance(name, str):
        raise QueryError(f"strategy must be a name, got {type(name).__name__}")
    if name in available_strategies():
        return name, "", ""
    if policy == "error":
        strategy_class(name)  # the registry's own error, naming the known strategies
    return FALLBACK_STRATEGY, name[:80], f"unknown retrieval strategy {name!r:.80}: used {FALLBACK_STRATEGY}"


def _options(strategy: str, given: Any, pairs: Sequence[str], lenient: bool) -> dict[str, Any]:
    """The strategy's options checked against its declarations; ``lenient`` (a fallback strategy): options it
    does not declare are dropped, not refused."""
    cls = strategy_class(strategy)
    declared = cls.all_options()
    raw = dict(as_mapping("options", given))
    for pair in pairs:
        name = pair.partition("=")[0].strip()
        if lenient and name not in declared:
            continue
        try:
            raw.update(parse_option_pairs(strategy, declared, [pair]))
        except RagloomError as e:
            raise QueryError(str(e)) from e
    if lenient:
        raw = {k: v for k, v in raw.items() if k in declared}
    return _checked("options", strategy, declared, raw)


def _checked(what: str, owner: str, declared: Mapping[str, Option], given: Any) -> dict[str, Any]:
    raw = as_mapping(what, given)
    try:
        return check_options(owner, declared, raw)
    except RagloomError as e:
        raise QueryError(str(e)) from e


def check_chunking(name: Any) -> str | None:
    if name is None or name == "":
        return None
    if not isinstance(name, str) or name not in available_chunkers():
        raise QueryError(f"chunking={name!r:.80}: choose one of {', '.join(available_chunkers())}")
    return name


def _names(what: str, value: Any, known: Sequence[str]) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise QueryError(f"{what}s must be a list of names")
    unknown = [v[:80] for v in value if v not in known]
    if unknown:
        raise QueryError(f"unknown {what}(s) {unknown}; choose from {', '.join(known)}")
    return tuple(dict.fromkeys(value))


def check_transforms(value: Any) -> tuple[str, ...] | None:
    return _names("query transform", value, available_transforms())


def _transform_options(value: Any) -> dict[str, dict[str, Any]]:
    out = {}
    for name, options in as_mapping("transform_options", value).items():
        _names("query transform", [name], available_transforms())
        out[name] = _checked("transform_options", f"transform {name}", transform_options(name), options)
    return out


def _generation(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or value not in available_generations():
        raise QueryError(f"unknown generation strategy {value!r:.80}; choose from "
                         f"{', '.join(available_generations())}")
    return value


def _token_budget(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKEN_BUDGET:
        raise QueryError(f"token_budget must be an integer from 1 to {MAX_TOKEN_BUDGET}, got {value!r:.40}")
    return value
