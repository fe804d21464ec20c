"""Agent profiles: per agent, the query fields it runs with by default and the tools whose results it remembers.

A YAML file (its path is the setting RAGLOOM_AGENT_PROFILES) maps a profile name to::

    support-bot:
      description: answers product questions from the manuals
      strategy: hybrid            # any query field of ragloom.query.PROFILE_FIELDS
      namespaces: [manuals]       # [] : this agent never retrieves
      k: 8
      options: {alpha: 0.4}
      transforms: [reformulate]
      remember:                   # tools whose results are injected; anything else is refused
        web_search: {ttl_seconds: 3600}
        calculator: {}            # no TTL: kept until deleted

The file is read and checked once, at start (``ragloom.query.load_profiles``): every profile's fields go through
the one query parser, so a bad strategy, option or namespace is an error naming the file and the profile before
any request arrives. A request
names a profile (``profile``); its own fields win over the profile's, and its options are merged key by key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragloom.dynamic import MAX_TTL_SECONDS
from ragloom.errors import ConfigError, QueryError, RagloomError

# the query fields a profile may set: what an agent is, not what one request asks
PROFILE_FIELDS = ("strategy", "chunking", "namespaces", "k", "options", "transforms", "transform_options",
                  "exclude_dynamic", "filters", "generation", "generation_options", "token_budget")
MAX_TOOL_CHARS = 64
CheckFields = Callable[[Mapping[str, Any]], object]  # raises a RagloomError for fields the query parser refuses


@dataclass(frozen=True)
class RememberedTool:
    """A tool whose results the agent keeps; ``ttl_seconds`` None: until deleted."""

    name: str
    ttl_seconds: float | None = None


@dataclass(frozen=True)
class AgentProfile:
    name: str
    description: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)
    tools: Mapping[str, RememberedTool] = field(default_factory=dict)

    def tool(self, name: str) -> RememberedTool:
        """The remembered tool ``name``; a QueryError (a 400 at the service) when this profile does not keep it."""
        if name not in self.tools:
            kept = ", ".join(self.tools) or "none"
            raise QueryError(f"profile {self.name!r} does not remember results of tool {name!r:.80} "
                             f"(it remembers: {kept})")
        return self.tools[name]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "fields": dict(self.fields),
                "remember": {t.name: {"ttl_seconds": t.ttl_seconds} for t in self.tools.values()}}


class Profiles:
    """The profiles of one file (or none: then naming a profile is an error that says how to add one)."""

    def __init__(self, profiles: Mapping[str, AgentProfile] | None = None, source: str = "") -> None:
        self._profiles = dict(profiles or {})
        self.source = source

    @classmethod
    def load(cls, path: Path | str | None, check: CheckFields) -> Profiles:
        """The file's profiles, each one's fields checked by ``check``; no path: no profiles."""
        if path is None or str(path) == "":
            return cls()
        import yaml

        path = Path(path).expanduser()
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise ConfigError(f"RAGLOOM_AGENT_PROFILES: cannot read {path}: {e.strerror or e}") from e
        except yaml.YAMLError as e:
            raise ConfigError(f"RAGLOOM_AGENT_PROFILES: {path} is not valid YAML: {e}") from e
        return cls.from_mapping(raw or {}, check, source=str(path))

    @classmethod
    def from_mapping(cls, raw: Any, check: CheckFields, source: str = "profiles") -> Profiles:
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{source}: the file must map profile names to profiles, got {type(raw).__name__}")
        return cls({str(name): _profile(str(name), body, source, check) for name, body in raw.items()}, source)

    def get(self, name: str) -> AgentProfile:
        if name not in self._profiles:
            if not self._profiles:
                raise QueryError(f"profile {name!r:.80}: no agent profiles are configured (RAGLOOM_AGENT_PROFILES)")
            raise QueryError(f"unknown profile {name!r:.80}; profiles: {', '.join(self._profiles)}")
        return self._profiles[name]

    def names(self) -> list[str]:
        return list(self._profiles)

    def describe(self) -> list[dict[str, Any]]:
        return [p.describe() for p in self._profiles.values()]

    def __bool__(self) -> bool:
        return bool(self._profiles)


def apply_profile(profile: AgentProfile | None, given: Mapping[str, Any]) -> dict[str, Any]:
    """The request's fields over the profile's: a field the request sets wins; options merge key by key."""
    if profile is None:
        return dict(given)
    out = {**profile.fields, **given}
    for name in ("options", "transform_options", "generation_options"):
        if name in profile.fields and name in given and isinstance(given[name], Mapping):
            out[name] = {**profile.fields[name], **given[name]}
    return out


def _profile(name: str, body: Any, source: str, check: CheckFields) -> AgentProfile:
    where = f"{source}: profile {name!r}"
    if not name or len(name) > MAX_TOOL_CHARS:
        raise ConfigError(f"{source}: a profile name has 1 to {MAX_TOOL_CHARS} characters, got {name!r:.80}")
    if not isinstance(body, Mapping):
        raise ConfigError(f"{where}: expected a mapping of fields, got {type(body).__name__}")
    body = dict(body)
    description = body.pop("description", "")
    remember = body.pop("remember", {}) or {}
    unknown = sorted(set(body) - set(PROFILE_FIELDS))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; a profile sets {', '.join(PROFILE_FIELDS)}, "
                          "description and remember")
    try:
        check(body)
    except RagloomError as e:
        raise ConfigError(f"{where}: {e}") from e
    return AgentProfile(name=name, description=str(description), fields=body, tools=_tools(remember, where))


def _tools(raw: Any, where: str) -> dict[str, RememberedTool]:
    if isinstance(raw, list):  # a plain list of names: no TTL
        raw = {name: {} for name in raw}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: remember must map tool names to {{ttl_seconds: ...}}")
    tools = {}
    for tool, spec in raw.items():
        if not isinstance(tool, str) or not 1 <= len(tool) <= MAX_TOOL_CHARS:
            raise ConfigError(f"{where}: a tool name has 1 to {MAX_TOOL_CHARS} characters, got {tool!r:.80}")
        spec = spec or {}
        if not isinstance(spec, Mapping) or set(spec) - {"ttl_seconds"}:
            raise ConfigError(f"{where}: tool {tool!r} takes only ttl_seconds, got {spec!r:.80}")
        ttl = spec.get("ttl_seconds")
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float))
                                or not 0 < ttl <= MAX_TTL_SECONDS):
            raise ConfigError(f"{where}: tool {tool!r}: ttl_seconds must be within (0, {MAX_TTL_SECONDS}], "
                              f"got {ttl!r:.40}")
        tools[tool] = RememberedTool(tool, None if ttl is None else float(ttl))
    return tools
