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
    (the walk's first chunk's share of the mass of its first ``TOP``), ``average_overlap`` (the share of the
    walk's first d chunks among the lane's first d, averaged over d = 1..``TOP``: where ``overlap`` moves by a
    tenth when one chunk enters or leaves the first ``TOP``, this moves by less, and weighs the heads more)."""

    named: int
    lane_top: float
    lane_margin: float
    overlap: float
    concentration: float
    average_overlap: float


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
    return WalkSignals(named, top, margin, overlap, concentration, average_overlap(lane_ids, walk_ids))


def average_overlap(lane_ids: Sequence[Hashable], walk_ids: Sequence[Hashable], depth: int = TOP) -> float:
    """Mean over d = 1..``depth`` of the share of ``walk_ids[:d]`` found in ``lane_ids[:d]`` (1.0 when the walk
    is empty, as ``overlap``)."""
    if not walk_ids:
        return 1.0
    lane_seen: set[Hashable] = set()
    walk_seen: set[Hashable] = set()
    shared, total = 0, 0.0
    for d in range(depth):
        for ids, seen, other in ((lane_ids, lane_seen, walk_seen), (walk_ids, walk_seen, lane_seen)):
            if d < len(ids) and ids[d] not in seen:
                seen.add(ids[d])
                shared += ids[d] in other
        total += shared / (d + 1)
    return total / depth


@dataclass(frozen=True)
class GateThresholds:
    """The walk answers when every bound holds: the query names ``min_named`` to ``max_named`` (None: no upper
    bound) graph entities, the walk keeps at least ``min_overlap`` of the lane's first ``TOP`` (it re-ranks the
    lane rather than replacing it), its first chunk holds at least ``min_concentration`` of the mass of its
    first ``TOP``, and the two orders' ``average_overlap`` is at least ``min_average_overlap``."""

    min_named: int = 1
    max_named: int | None = None
    min_overlap: float = 0.0
    min_concentration: float = 0.0
    min_average_overlap: float = 0.0


def should_walk(signals: WalkSignals | Mapping[str, float], gate: GateThresholds) -> bool:
    s = signals if isinstance(signals, Mapping) else dataclasses.asdict(signals)
    return (s["named"] >= gate.min_named and (gate.max_named is None or s["named"] <= gate.max_named)
            and s["overlap"] >= gate.min_overlap and s["concentration"] >= gate.min_concentration
            and (gate.min_average_overlap <= 0 or s["average_overlap"] >= gate.min_average_overlap))
