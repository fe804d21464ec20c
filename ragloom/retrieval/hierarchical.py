"""hierarchical: coarse-to-fine search down the levels of the hierarchical chunks, with auto-merge and
parent-document expansion."""

from __future__ import annotations

from typing import Any

from ragloom.filters import Condition
from ragloom.retrieval import lanes
from ragloom.retrieval import postprocess as pp
from ragloom.retrieval.base import Retriever, SearchRequest, register_retrieval_strategy, store_call
from ragloom.retrieval.options import Option
from ragloom.types import RetrievedItem

MAX_LEVELS = 8
EXPAND_MODES = ("none", "parent", "document")


def _level(level: int) -> Condition:
    return Condition("level", "level", "eq", level)


def _parents(ids: list[str]) -> Condition:
    return Condition("parent_id", "parent_id", "in", ids)


@register_retrieval_strategy("hierarchical")
class HierarchicalRetriever(Retriever):
    """Coarse to fine on the ``hierarchical`` collection (``Chunk.level`` 0 = whole document, then sections,
    parents, children; see ragloom.chunking.hierarchical).

    From ``start_level`` down to the level above the leaves, each level is searched only among the children of
    the chunks the level above kept: ``level_top_k[i]`` (else ``coarse_k``) best, dropping scores under
    ``level_min_score[i]`` (else ``min_score``). The leaves are then searched among the last level's children
    for ``k * leaf_multiplier`` candidates. A level keeping nothing (every chunk under its floor) returns no
    items (``empty_level="empty"``), or with ``empty_level="flat"`` searches the leaves flat, named in
    ``fallbacks``. No level above the leaves (a flat collection): a flat search, named in ``fallbacks``.

    Auto-merge: when at least 2 retrieved children of one parent cover at least ``merge_threshold`` of its
    text, the parent replaces them (at the best child's place and score; repeated up the levels). Children
    partition their parent, so covered text stands for "that share of its children", weighting long children
    more than a bare count would.

    ``expand``: ``parent`` returns each hit's parent instead of the hit, ``document`` its level-0 chunk
    (the whole document); hits sharing one are returned once.
    """

    summary = "coarse-to-fine down the levels of hierarchical chunks, with auto-merge and expansion"

    default_chunking = "hierarchical"
    declared_options: dict[str, Option] = {
        "start_level": Option(1, min=0, max=MAX_LEVELS - 1,
                              help="the first level searched (0 would rank whole documents first)"),
        "coarse_k": Option(20, min=1, help="chunks kept per level above the leaves"),
        "level_top_k": Option((), kind=tuple, of=int, min=1,
                              help="chunks kept per level from start_level, e.g. [10, 30]; else coarse_k"),
        "level_min_score": Option((), kind=tuple, of=float,
                                  help="score floor per level from start_level; else min_score"),
        "min_score": Option(0.0, help="a coarse chunk scoring under this is dropped"),
        "leaf_level": Option(-1, min=-1, max=MAX_LEVELS - 1,
                             help="the leaf level; -1 finds it (the deepest level present), once per collection"),
        "leaf_multiplier": Option(3, min=1, help="the leaves are searched for k x this many candidates"),
        # hybrid: the coarse levels' vectors read only the first 256 tokens of a section or parent (the model's
        # limit); BM25 reads all of it. ObliQA dev passage R@10 0.749 (dense) -> 0.955 (hybrid).
        "lane": Option("hybrid", choices=("dense", "hybrid"), help="the lane every level is searched with"),
        "alpha": Option(0.5, min=0.0, max=1.0, help="lane=hybrid: 0 = BM25 only, 1 = vector only"),
        "auto_merge": Option(True, help="replace children covering merge_threshold of a parent by the parent"),
        "merge_threshold": Option(0.5, min=0.0, max=1.0, exclusive_min=True,
                                  help="share of a parent's text its retrieved children must cover to merge"),
        "expand": Option("none", choices=EXPAND_MODES,
                         help="return each hit's parent, or its whole document (level 0), instead of the hit"),
        "empty_level": Option("empty", choices=("empty", "flat"),
                              help="a level where no chunk passes its floor: return nothing (empty), or search "
                                   "the leaves flat (flat)"),
    }

    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        leaf = options["leaf_level"] if options["leaf_level"] >= 0 else self._leaf_level(request)
        start = options["start_level"]
        kept: dict[int, dict[str, RetrievedItem]] = {}  # level -> chunk id -> item, the coarse levels kept
        parent_ids: list[str] | None = None
        for i, level in enumerate(range(start, leaf)):
            top_k = _per_level(options["level_top_k"], i, options["coarse_k"])
            floor = _per_level(options["level_min_score"], i, options["min_score"])
            items = self._search(request, options, top_k, _level(level), _parents(parent_ids) if parent_ids else None)
            items = [item for item in items if item.score >= floor]
            if not items:
                if options["empty_level"] == "empty":
                    request.info["hierarchical"] = {"leaf_level": leaf, "empty_level": level,
                                                    "levels_searched": sorted(kept) + [level]}
                    return []
                request.fallbacks.append(f"hierarchical->flat: no level-{level} chunk scored >= {floor}")
                kept.clear()
                parent_ids = None
                break
            kept[level] = {item.chunk_id: item for item in items}
            parent_ids = list(kept[level])
        if start >= leaf:
            request.fallbacks.append(f"hierarchical->flat: no level between start_level={start} and the leaves "
                                     f"(level {leaf}); is {self.chunking!r} a hierarchical collection?")
        request.info["hierarchical"] = {"leaf_level": leaf, "levels_searched": sorted(kept),
                                        "candidates_per_level": {lvl: len(v) for lvl, v in kept.items()},
                                        "parents": parent_ids or []}
        leaves = self._search(request, options, request.fetch_k * options["leaf_multiplier"], _level(leaf),
                              _parents(parent_ids) if parent_ids else None)
        results = leaves[: request.fetch_k]
        if options["auto_merge"] and kept:
            results = auto_merge(results, kept, leaf, options["merge_threshold"])
            request.info["hierarchical"]["merged"] = [i.chunk_id for i in results if i.metadata.get("merged_from")]
        if options["expand"] != "none":
            results = self._expand(request, results, kept, options["expand"])
        return results

    def _search(self, request: SearchRequest, options: dict[str, Any], k: int, *extra: Condition | None
                ) -> list[RetrievedItem]:
        return lanes.run(options["lane"], request, self.chunking, k, *extra, alpha=options["alpha"])

    def _leaf_level(self, request: SearchRequest) -> int:
        """The deepest level with chunks the query can see, probed once per collection and cached."""
        key = f"leaf_level:{self.chunking}"
        if key in self.context.cache:
            return self.context.cache[key]
        vector = request.vector()
        deepest = 0
        for level in range(1, MAX_LEVELS):
            where = request.where(_level(level))
            if not store_call(request, "leaf_probe", lambda where=where: self.context.vectors.near_vector(
                    self.chunking, vector, 1, where=where)):
                break
            deepest = level
        if deepest > 0:  # a flat or empty view says nothing about the collection: probe again next time
            self.context.cache[key] = deepest
        return deepest

    def _expand(self, request: SearchRequest, items: list[RetrievedItem], kept: dict[int, dict[str, RetrievedItem]],
                mode: str) -> list[RetrievedItem]:
        """Replace each item by its parent (or its document's level-0 chunk), read under the scope filter."""
        known = {cid: item for level in kept.values() for cid, item in level.items()}
        if mode == "parent":
            targets = [item.metadata.get("parent_id") for item in items]
            missing = [t for t in dict.fromkeys(targets) if t and t not in known]
            if missing:
                where = request.where()
                for got in store_call(request, "fetch", lambda: self.context.vectors.fetch(
                        self.chunking, missing, where=where, include_vectors=request.include_vectors)):
                    known[got.chunk_id] = got
        else:
            documents = list(dict.fromkeys(item.document_id for item in items))
            roots = lanes.dense(request, self.chunking, len(documents), _level(0),
                                Condition("document_id", "document_id", "in", documents)) if documents else []
            root_of = {root.document_id: root.chunk_id for root in roots}
            known.update({root.chunk_id: root for root in roots})
            targets = [root_of.get(item.document_id) for item in items]
        out: dict[str, RetrievedItem] = {}
        for item, target in zip(items, targets, strict=True):
            parent = known.get(target) if target else None
            if parent is None or parent.chunk_id == item.chunk_id:  # top level already, or not visible
                out.setdefault(item.chunk_id, item)
                continue
            if target not in out:
                out[target] = pp.stand_in(parent, item)
                out[target].metadata["expanded_from"] = []
            out[target].metadata["expanded_from"].append(item.chunk_id)
        return list(out.values())


def _per_level(values: tuple, i: int, default: Any) -> Any:
    return values[i] if i < len(values) else default


def auto_merge(items: list[RetrievedItem], kept: dict[int, dict[str, RetrievedItem]], leaf: int,
               threshold: float) -> list[RetrievedItem]:
    """Replace >= 2 children covering >= ``threshold`` of a kept parent's text by that parent, level by level up.

    The parent takes the place and score of its best child; ``metadata["merged_from"]`` lists the children.
    """
    for level in range(leaf - 1, -1, -1):
        parents = kept.get(level)
        if not parents:
            continue
        groups: dict[str, list[RetrievedItem]] = {}
        for item in items:
            pid = item.metadata.get("parent_id")
            if pid in parents:
                groups.setdefault(pid, []).append(item)
        merge = {pid for pid, children in groups.items() if len(children) >= 2
                 and _coverage(parents[pid], children) >= threshold}
        if not merge:
            continue
        out: list[RetrievedItem] = []
        placed: set[str] = set()
        for item in items:
            pid = item.metadata.get("parent_id")
            if pid not in merge:
                out.append(item)
                continue
            if pid in placed:
                continue
            placed.add(pid)
            merged = pp.stand_in(parents[pid], item)
            merged.metadata["merged_from"] = [c.chunk_id for c in groups[pid]]
            out.append(merged)
        items = out
    return items


def _coverage(parent: RetrievedItem, children: list[RetrievedItem]) -> float:
    start, end = parent.metadata.get("start"), parent.metadata.get("end")
    if start is None or end is None or end <= start:
        return 0.0
    covered = sum(max(0, min(c.metadata.get("end", 0), end) - max(c.metadata.get("start", 0), start))
                  for c in children)
    return covered / (end - start)
