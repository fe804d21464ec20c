"""Judging graph_rag's context item against questions written with the chain of entities their answer follows
(tests/data/graph_chains.json): does every hop of the chain appear as an edge, and how many edges are typed."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragloom.extraction import normalize_name
from ragloom.settings import REPO_ROOT
from ragloom.types import RetrievalResult

CHAINS_FILE = REPO_ROOT / "tests" / "data" / "graph_chains.json"


@dataclass
class ChainQuestion:
    question: str
    chain: list[list[str]]  # hops; each a list of names the entity may go by


@dataclass
class ChainJudgement:
    question: str
    hops: int  # hops in the chain
    hops_found: int  # hops present as an edge of the context item
    typed_hops: int  # of those, present as a typed (SVO) edge
    edges: int  # edges in the context item
    typed_edges: int

    @property
    def found(self) -> bool:
        return self.hops_found == self.hops


def load_chains(path: Path = CHAINS_FILE) -> list[ChainQuestion]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return [ChainQuestion(q["question"], [list(names) for names in q["chain"]]) for q in data["questions"]]


def context_graph(result: RetrievalResult) -> Mapping[str, Any]:
    """The structure of the result's graph context item (empty when it has none)."""
    for item in result.items:
        graph = item.metadata.get("graph")
        if item.metadata.get("source") == "graph_rag" and isinstance(graph, Mapping):
            return graph
    return {}


def judge(question: ChainQuestion, graph: Mapping[str, Any]) -> ChainJudgement:
    """Hops of ``question``'s chain found among ``graph``'s edges (either direction, any type; names compared
    normalised)."""
    names = {n["entity_id"]: normalize_name(n["name"]) for n in graph.get("nodes", [])}
    edges: dict[frozenset[str], set[str]] = {}
    for edge in graph.get("edges", []):
        pair = frozenset((names.get(edge["source"], ""), names.get(edge["target"], "")))
        edges.setdefault(pair, set()).add(edge.get("family", ""))
    found = typed = 0
    for a, b in zip(question.chain, question.chain[1:], strict=False):
        families = set().union(*(edges.get(frozenset((x, y)), set()) for x in _norms(a) for y in _norms(b)))
        found += bool(families)
        typed += "svo" in families
    all_edges = graph.get("edges", [])
    return ChainJudgement(question.question, len(question.chain) - 1, found, typed, len(all_edges),
                          sum(e.get("family") == "svo" for e in all_edges))


def _norms(names: Iterable[str]) -> list[str]:
    return [normalize_name(n) for n in names]


def table(judgements: Sequence[ChainJudgement]) -> str:
    """A Markdown table, one row per question, and a total row."""
    rows = ["| question | chain found | hops found | typed hops | edges | typed edges |",
            "| --- | --- | --- | --- | --- | --- |"]
    for j in judgements:
        rows.append(f"| {j.question} | {'yes' if j.found else 'no'} | {j.hops_found}/{j.hops} | {j.typed_hops} | "
                    f"{j.edges} | {j.typed_edges} |")
    edges = sum(j.edges for j in judgements)
    typed = sum(j.typed_edges for j in judgements)
    rows.append(f"| **all {len(judgements)}** | {sum(j.found for j in judgements)} | "
                f"{sum(j.hops_found for j in judgements)}/{sum(j.hops for j in judgements)} | "
                f"{sum(j.typed_hops for j in judgements)} | {edges} | {typed} ({typed / max(edges, 1):.0%}) |")
    return "\n".join(rows)
