"""hierarchical: coarse-to-fine search down the levels of the hierarchical chunks, with auto-merge and
parent-document expansion."""

from __future__ import annotations

from typing import Any

from ragloom.chunking import HierarchicalChunker, chunk_levels
from ragloom.errors import RetrievalError
from ragloom.filters import Condition
from ragloom.options import Option
from ragloom.retrieval import lanes
from ragloom.retrieval import postprocess as pp
from ragloom.retrieval.base import MAX_K, Retriever, SearchRequest, register_retrieval_strategy, store_call
from ragloom.types import RetrievedItem

EXPAND_MODES = ("none", "parent", "document")
# the least score each lane gives: hybrid's fusions are >= 0 (relative scores in [0, 1], reciprocal ranks),
# a dense cosine >= -1
LOWEST_SCORE = {"hybrid": 0.0, "dense": -1.0}
CONSTRAINTS = ("none", "previous", "all")
_NAMES = " | ".join(HierarchicalChunker.default_levels())  # for the help lines: the built-in chunking's levels


def _level(level: int) -> Condition:
    return Condition("level", "level", "eq", level)


def _parents(ids: list[str]) -> Condition:
    return Condition("parent_id", "parent_id", "in", ids)


@register_retrieval_strategy("hierarchical")
class HierarchicalRetriever(Retriever):
    """Coarse to fine on a collection whose chunks nest in named levels (``Chunk.level`` indexes the names its
    chunker declares, ``Chunker.default_levels``; the built-in ``hierarchical``: document, section,
    parent_1024, child).

    ``constrain_by="all"`` (default): from ``start_level`` down to the level above ``output_level``, each level
    is searched only among the children of the chunks the level above kept, keeping its ``level_top_k[name]``
    (else ``coarse_k``) best and dropping scores under ``score_threshold[name]`` (else ``min_score``); the
    output level is then searched among the last level's children for ``k * leaf_multiplier`` candidates
    (floor: ``score_threshold[output_level]``, if named). ``previous``: only the level right above the output
    level is searched (flat) and restricts it. ``none``: the output level is searched flat.

    A searched level keeping nothing (no child of what the level above kept, or every chunk under its floor)
    returns no items (``empty_level="empty"``, ``info["hierarchical"]["empty_level"]`` names it), or with
    ``empty_level="flat"`` searches the output level flat, named in ``fallbacks``. A chunking without levels
    (a flat collection): a flat search, named in ``fallbacks``.

    Auto-merge: when at least 2 retrieved children of one kept parent cover at least ``merge_threshold`` of
    its text, the parent replaces them (at the best child's place and score; repeated up the levels).
    Children partition their parent, so covered text stands for "that share of its children", weighting
    long children more than a bare count would.

    ``expand``: ``parent`` returns each hit's parent instead of the hit, ``document`` its level-0 chunk
    (the whole document); hits sharing one are returned once.
    """

    summary = "coarse-to-fine down the named levels of hierarchical chunks, with auto-merge and expansion"

    default_chunking = "hierarchical"
    declared_options: dict[str, Option] = {
        "start_level": Option("section", help=f"the first level searched, by name ({_NAMES}); document "
                                              "ranks whole documents first"),
        "output_level": Option(None, kind=str,
                               help=f"the level whose chunks are returned, by name ({_NAMES}); null: the finest"),
        "constrain_by": Option("all", choices=CONSTRAINTS,
                               help="levels restricting the output level's search: every one from start_level "
                                    "(all), the one right above (previous), or none (flat)"),
        "coarse_k": Option(20, min=1, max=MAX_K, help="chunks kept per level above the output level"),
        "level_top_k": Option({}, kind=dict, of=int, min=1, max=MAX_K,
                              help='chunks kept per level by name, e.g. {"section": 10}; else coarse_k'),
        "score_threshold": Option({}, kind=dict, of=float,
                                  help='score floor per level by name, e.g. {"section": 0.3, "child": 0.2}; '
                                       'else min_score above the output level, none at it'),
        "min_score": Option(0.0, help="a chunk above the output level scoring under this is dropped"),
        "leaf_multiplier": Option(3, min=1, max=20, help="the output level is searched for k x this many candidates"),
        # hybrid: the coarse levels' vectors read only the first 256 tokens of a section or parent (the model's
        # limit); BM25 reads all of it. ObliQA dev passage R@10 0.749 (dense) -> 0.955 (hybrid).
        "lane": Option("hybrid", choices=("dense", "hybrid"), help="the lane every level is searched with"),
        "alpha": lanes.ALPHA,
        "auto_merge": Option(True, help="replace children covering merge_threshold of a parent by the parent"),
        "merge_threshold": Option(0.5, min=0.0, max=1.0, exclusive_min=True,
                                  help="share of a parent's text its retrieved children must cover to merge"),
        "expand": Option("none", choices=EXPAND_MODES,
                         help="return each hit's parent, or its whole document (level 0), instead of the hit"),
        "empty_level": Option("empty", choices=("empty", "flat"),
                              help="a searched level keeping nothing: return nothing (empty), or search the "
                                   "output level flat (flat)"),
    }

    def __init__(self, context: Any, chunking: str | None = None, **options: Any) -> None:
        super().__init__(context, chunking, **options)
        self.levels = chunk_levels(self.chunking)
        self._plan(self.options)  # level names checked at construction too, before any search

    def _plan(self, options: dict[str, Any]) -> tuple[int, int]:
        """(start, output) level numbers; a name the chunking does not have is a RetrievalError listing its
        levels. A chunking without levels plans nothing: (0, 0)."""
        if not self.levels:
            return 0, 0
        named = {"start_level": [options["start_level"]],
                 "output_level": [options["output_level"]] if options["output_level"] is not None else [],
                 "level_top_k": list(options["level_top_k"]), "score_threshold": list(options["score_threshold"])}
        for option, names in named.items():
            unknown = [n for n in names if n not in self.levels]
            if unknown:
                raise RetrievalError(f"{self.name}: option {option} names {', '.join(map(repr, unknown))}, not a "
                                     f"level of chunking {self.chunking!r}; its levels: {' | '.join(self.levels)}")
        output = len(self.levels) - 1 if options["output_level"] is None else self.levels.index(options["output_level"])
        return self.levels.index(options["start_level"]), output

    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        start, output = self._plan(options)
        names = self.levels
        if not names:
            request.fallbacks.append(f"hierarchical->flat: chunking {self.chunking!r} has no levels; is it a "
                                     "hierarchical collection?")
            return self._search(request, options, request.fetch_k, None, None)
        above = {"none": [], "previous": [output - 1] if output - 1 >= start else [],
                 "all": list(range(start, output))}[options["constrain_by"]]
        info: dict[str, Any] = {"output_level": names[output], "constrain_by": options["constrain_by"],
                                "levels_searched": []}
        request.info["hierarchical"] = info
        kept: dict[int, dict[str, RetrievedItem]] = {}  # level -> chunk id -> item, the coarse levels kept
        parent_ids: list[str] | None = None
        out_k, out_floor = request.fetch_k * options["leaf_multiplier"], options["score_threshold"].get(names[output])
        for level in [*above, output]:
            name = names[level]
            info["levels_searched"].append(name)
            if level == output:
                k, floor = out_k, out_floor
            else:
                k = options["level_top_k"].get(name, options["coarse_k"])
                floor = options["score_threshold"].get(name, options["min_score"])
            items = self._all_children(request, k, level, parent_ids, floor, options["lane"]) \
                if level != output else None
            if items is None:
                items = _floored(self._search(request, options, k, level, parent_ids), floor)
            else:
                info.setdefault("kept_whole", []).append(name)
            if not items:
                if options["empty_level"] == "empty" or (level == output and parent_ids is None):
                    info["empty_level"] = name  # searching the output level flat again would find nothing more
                    return []
                under = f" under the kept {names[level - 1]} chunks" if parent_ids else ""
                request.fallbacks.append(f"hierarchical->flat: no {name} chunk{under} scored >= {floor or 0.0}; "
                                         f"{names[output]} searched flat")
                kept.clear()
                parent_ids = None
                items = _floored(self._search(request, options, out_k, output, None), out_floor)
                break
            if level != output:
                kept[level] = {item.chunk_id: item for item in items}
                parent_ids = list(kept[level])
        info["candidates_per_level"] = {names[lvl]: len(v) for lvl, v in kept.items()}
        info["parents"] = parent_ids if kept else []
        results = items[: request.fetch_k]
        if options["auto_merge"] and kept:
            results = auto_merge(results, kept, output, options["merge_threshold"])
            info["merged"] = [i.chunk_id for i in results if i.metadata.get("merged_from")]
        if options["expand"] != "none":
            results = self._expand(request, results, kept, options["expand"])
        return results

    def _search(self, request: SearchRequest, options: dict[str, Any], k: int, level: int | None,
                parent_ids: list[str] | None) -> list[RetrievedItem]:
        extra = [_level(level) if level is not None else None, _parents(parent_ids) if parent_ids else None]
        return lanes.run(options["lane"], request, self.chunking, k, *extra, alpha=options["alpha"])

    def _all_children(self, request: SearchRequest, k: int, level: int, parent_ids: list[str] | None,
                      floor: float | None, lane: str) -> list[RetrievedItem] | None:
        """A level above the output level whose candidates (the children of what the level above kept) all fit
        in its ``k``, under a floor no score of the lane is below, keeps every one of them whatever the ranking:
        they are read in one unranked fetch, cheaper than a search (the output level's ranking is untouched;
        kept chunks only restrict the next level and stand in for merged children). None: more than ``k``
        candidates, a floor that may drop some, or no level above (the first level searched ranks)."""
        if parent_ids is None or (floor is not None and floor > LOWEST_SCORE[lane]):
            return None
        where = request.where(_level(level), _parents(parent_ids))
        found = store_call(request, "fetch", lambda: self.context.vectors.fetch_where(
            self.chunking, where, k + 1, include_vectors=request.include_vectors))
        return found if len(found) <= k else None

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


def _floored(items: list[RetrievedItem], floor: float | None) -> list[RetrievedItem]:
    return items if floor is None else [item for item in items if item.score >= floor]


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
