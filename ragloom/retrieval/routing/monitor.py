"""What the adaptive strategy did over many queries: the strategy mix, the retry rate and, where relevance
judgements exist (evaluation), how often a retry improved the result.

Everything is read from a result's ``metadata.details["adaptive"]`` (see ``ragloom.retrieval.adaptive``): the
strategy routed to, every try and the one whose items were returned. A retry *improved* a query when the
returned try scores higher than the first try against the judgements (the caller's ``gain``); when the
first try is the one returned the gain is 0 (unchanged). The query job, ``ragloom eval`` and the service's
``/metrics`` all count through this module.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

GAIN_EPSILON = 1e-9  # a gain within this of 0 is "unchanged", not an improvement


@dataclass(frozen=True)
class Outcome:
    """One adaptive query: the strategy routed to, the strategies tried in order, the one returned, and
    each try's distinct documents in rank order (for scoring the first try against the returned one)."""

    routed: str
    tried: tuple[str, ...]
    used: str
    documents: tuple[tuple[str, ...], ...]

    @property
    def retried(self) -> bool:
        return len(self.tried) > 1

    @property
    def first_documents(self) -> tuple[str, ...]:
        return self.documents[0] if self.documents else ()

    @property
    def used_documents(self) -> tuple[str, ...]:
        return self.documents[self.tried.index(self.used)] if self.used in self.tried else ()


def outcome(metadata: Mapping[str, Any]) -> Outcome | None:
    """The adaptive outcome recorded in a result's ``metadata.details`` (or an answer's ``retrieval``); None for a
    result of another strategy."""
    info = metadata.get("adaptive")
    if not isinstance(info, Mapping) or not info.get("tries"):
        return None
    tries = info["tries"]
    return Outcome(routed=str(info["route"]["strategy"]), tried=tuple(str(t["strategy"]) for t in tries),
                   used=str(info["used"]), documents=tuple(tuple(t.get("documents", ())) for t in tries))


@dataclass
class AdaptiveTally:
    """Counts over many queries' outcomes. ``judged`` counts retried queries whose gain was given."""

    queries: int = 0
    routed: Counter[str] = field(default_factory=Counter)
    used: Counter[str] = field(default_factory=Counter)
    retried: int = 0
    retries: int = 0  # tries after the first, summed over queries
    judged: int = 0
    improved: int = 0
    worsened: int = 0

    def add(self, found: Outcome | Mapping[str, Any] | None, gain: float | None = None) -> bool:
        """Count one query (an outcome, or a result's metadata); False when it was not an adaptive one.
        ``gain``: the returned try's score minus the first try's, for a retried query (evaluation)."""
        if found is not None and not isinstance(found, Outcome):
            found = outcome(found)
        if found is None:
            return False
        self.queries += 1
        self.routed[found.routed] += 1
        self.used[found.used] += 1
        if found.retried:
            self.retried += 1
            self.retries += len(found.tried) - 1
            if gain is not None:
                self.judged += 1
                self.improved += gain > GAIN_EPSILON
                self.worsened += gain < -GAIN_EPSILON
        return True

    @property
    def retry_rate(self) -> float:
        return self.retried / self.queries if self.queries else 0.0

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "queries": self.queries, "routed": dict(sorted(self.routed.items())),
            "used": dict(sorted(self.used.items())), "retried": self.retried, "retries": self.retries,
            "retry_rate": round(self.retry_rate, 4)}
        if self.judged:
            out.update({"retries_judged": self.judged, "retry_improved": self.improved,
                        "retry_worsened": self.worsened, "retry_improved_rate": round(self.improved / self.judged, 4)})
        return out

    def describe(self) -> str:
        """One line for a log or a report."""
        return describe(self.as_dict())


def describe(counts: Mapping[str, Any]) -> str:
    """``AdaptiveTally.as_dict()`` as one line: the routed mix, the retry rate, what the retries did."""
    queries = counts["queries"]
    if not queries:
        return "no adaptive queries"
    mix = ", ".join(f"{s} {n / queries:.0%}" for s, n in sorted(counts["routed"].items(), key=lambda x: (-x[1], x[0])))
    text = f"routed {mix}; retried {counts['retried']}/{queries} ({counts['retry_rate']:.0%})"
    if counts.get("retries_judged"):
        judged, better, worse = counts["retries_judged"], counts["retry_improved"], counts["retry_worsened"]
        text += (f"; the retry improved {better}, worsened {worse}, left {judged - better - worse} unchanged "
                 f"of {judged} judged")
    return text
