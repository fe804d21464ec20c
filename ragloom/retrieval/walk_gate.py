"""When graph_rag's walk may answer, and how far it may move the vector lane's order (pure functions)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


def combine(lane: Sequence[T], walk: Sequence[T], lane_head: int, walk_slots: int | None, k: int,
            key: Callable[[T], Hashable]) -> list[T]:
    """The lane's first ``lane_head`` in its order, then the walk's order for at most ``walk_slots`` entries
    (None: no bound) not listed yet, then the lane's order for the rest; each entry once (by ``key``), at most
    ``k``."""
    out: list[T] = []
    taken: set[Hashable] = set()

    def add(items: Sequence[T], limit: int | None) -> None:
        added = 0
        for item in items:
            if len(out) >= k or (limit is not None and added >= limit):
                return
            if key(item) not in taken:
                taken.add(key(item))
                out.append(item)
                added += 1

    add(lane[:lane_head], None)
    add(walk, walk_slots)
    add(lane, None)
    return out


@dataclass(frozen=True)
class WalkSignals:
    """What graph_rag knows about a query once it has walked: ``named`` (graph entities the query names),
    ``lane_top`` (the lane's best score), ``lane_margin`` (its best minus its second score, over its best),
    ``overlap`` (share of the walk's first ``TOP`` chunks among the lane's first ``TOP``), ``concentration``
    (the walk's first chunk's share of the mass of its first ``TOP``)."""

    named: int
    lane_top: float
    lane_margin: float
    overlap: float
    concentration: float


TOP = 10


def walk_signals(named: int, lane_scores: Sequence[float], lane_ids: Sequence[Hashable],
                 walk_ids: Sequence[Hashable], walk_mass: Sequence[float]) -> WalkSignals:
    top = float(lane_scores[0]) if lane_scores else 0.0
    second = float(lane_scores[1]) if len(lane_scores) > 1 else 0.0
    margin = (top - second) / top if top > 0 else 0.0
    head = set(lane_ids[:TOP])
    walked = list(walk_ids[:TOP])
    overlap = sum(c in head for c in walked) / len(walked) if walked else 1.0
    mass = [max(float(m), 0.0) for m in walk_mass[:TOP]]
    concentration = mass[0] / sum(mass) if mass and sum(mass) > 0 else 0.0
    return WalkSignals(named, top, margin, overlap, concentration)


@dataclass(frozen=True)
class GateThresholds:
    """The walk answers when every bound holds (the defaults hold always but for ``min_named``)."""

    min_named: int = 1
    max_lane_top: float = float("inf")
    max_lane_margin: float = float("inf")
    min_overlap: float = 0.0
    max_overlap: float = 1.0
    min_concentration: float = 0.0
    max_concentration: float = 1.0


def should_walk(signals: WalkSignals | Mapping[str, float], gate: GateThresholds) -> bool:
    s = signals if isinstance(signals, Mapping) else dataclasses.asdict(signals)
    return (s["named"] >= gate.min_named and s["lane_top"] <= gate.max_lane_top
            and s["lane_margin"] <= gate.max_lane_margin and gate.min_overlap <= s["overlap"] <= gate.max_overlap
            and gate.min_concentration <= s["concentration"] <= gate.max_concentration)
