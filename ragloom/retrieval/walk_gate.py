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
    """The walk answers when every bound holds: the query names ``min_named`` to ``max_named`` (None: no upper
    bound) graph entities, the walk keeps at least ``min_overlap`` of the lane's first ``TOP`` (it re-ranks the
    lane rather than replacing it), and its first chunk holds at least ``min_concentration`` of the mass of its
    first ``TOP``."""

    min_named: int = 1
    max_named: int | None = None
    min_overlap: float = 0.0
    min_concentration: float = 0.0


def should_walk(signals: WalkSignals | Mapping[str, float], gate: GateThresholds) -> bool:
    s = signals if isinstance(signals, Mapping) else dataclasses.asdict(signals)
    return (s["named"] >= gate.min_named and (gate.max_named is None or s["named"] <= gate.max_named)
            and s["overlap"] >= gate.min_overlap and s["concentration"] >= gate.min_concentration)
