"""graph_rag against hybrid on single-hop and multi-hop dev sets: ingest each set once, run many graph_rag
configurations on the same stores, then score them (and per-query combinations of them) with paired CIs.

    # per dataset: ingest (idempotent: a re-run embeds and extracts nothing new), then every configuration
    python benchmarks/graph_rag_single_hop.py collect --dataset ../shared/data/scifact --namespace GqScifact \\
        --out runs/scifact.json [--config NAME=JSON ...]
    # the sweep table, the default chosen by the rule below, and leave-one-dataset-out
    python benchmarks/graph_rag_single_hop.py analyse runs/scifact.json runs/obliqa.json runs/musique.json

``collect`` runs the references (hybrid, dense) and graph_rag under each ``--config`` (JSON options over the
shipped defaults; the built-in ones when none is given), and writes every query's ranked hits and graph_rag's
``graph`` metadata. Weaviate answers and spaCy parses are memoised per query (the configurations vary the
walk, not the lanes), so a configuration costs the walk alone.

``analyse`` scores the real configurations and, per query, gates built from two of them: ``lane`` (graph_rag
answering with its vector lane's order) and ``walk`` (the walk on every query, no head kept). A gate walks
when the query's signals pass (``ragloom.retrieval.walk_gate`` computes them, the same code graph_rag runs)
and then combines the two orders as graph_rag does (the lane's first ``lane_head``, at most ``walk_slots``
chunks from the walk, the lane's order after them). Each set is scored at its level (ObliQA: passage), as the
difference from hybrid with a paired 95% bootstrap CI.

The choice rule, the same on any group of sets: a point is feasible on a set when it meets that set's goal
(single-hop: nDCG@10 >= hybrid - 0.002; multi-hop: R@10 >= 0.78 and R@5 >= hybrid + 0.04); the chosen point
meets the goals of the most sets of the group, and among those has the highest mean nDCG@10 difference from
hybrid over them. Leave-one-dataset-out applies the rule to two sets and scores the third.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

MULTI_HOP = {"musique"}
COMBINE_KNOBS = ("lane_head", "walk_slots")
LEVEL = {"obliqa": "passage"}  # every other set at document level
REFERENCES = ("hybrid", "dense", "bm25")
# the gates and caps of the 2026-11-26 records, simulated when ``analyse`` gets no --grid (None: no bound)
SWEEP = [
    {"min_named": [0, 1, 2], "lane_head": [2, 3, 4], "walk_slots": [1, 2, 3, 4, 5, 6, 8, None]},
    {"min_named": [1], "max_named": [2, 3, 4, 6], "lane_head": [2, 3], "walk_slots": [3, None]},
    {"min_named": [1], "min_concentration": [0.35, 0.45], "min_overlap": [0, 0.7, 0.8], "lane_head": [3],
     "walk_slots": [3, None]},
    {"min_named": [0], "max_named": [2, 3, 4, 5, 6, 8, None], "min_overlap": [0, 0.6, 0.7, 0.8], "lane_head": [3],
     "walk_slots": [3, 4, 5, 6, 8, None]},
    # the 2026-11-28 record: the average overlap, which one chunk moves by less than min_overlap's tenth
    {"min_named": [0], "max_named": [4, 5, 6, 8, None],
     "min_average_overlap": [0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8], "lane_head": [3],
     "walk_slots": [3, 4, 5, 6, 8, None]},
]
# name -> graph_rag options over its defaults: the two orders the gates combine, and the shipped default
BUILTIN_CONFIGS = {
    "lane": {"query_entities": False, "require_named": True},  # no named entity: the vector lane's order
    "walk": {"require_named": False, "lane_head": 0, "max_named": 1000, "min_overlap": 0.0,
             "min_average_overlap": 0.0, "walk_slots": 1000},  # the walk on every query, nothing kept from the lane
    "default": {},  # as shipped
    # the default of 2026-11-26 to 2026-11-28: a count of shared chunks, a bound on names and on slots
    "previous default": {"require_named": False, "max_named": 5, "min_overlap": 0.7, "min_average_overlap": 0.0,
                         "walk_slots": 6},
}


# collecting -------------------------------------------------------------------------------------------------

def collect(args: argparse.Namespace) -> int:
    from graph_rag_sweep import Memo, MemoNlp

    from ragloom.api import Ragloom
    from ragloom.embedding import make_embedder
    from ragloom.errors import RagloomError
    from ragloom.evaluation.datasets import load_dataset
    from ragloom.evaluation.runner import DEFAULT_QUERY_OPTIONS, evaluate, hits_of, namespace_settings
    from ragloom.extraction import load_nlp
    from ragloom.query import parse_query
    from ragloom.retrieval.adaptive import query_features
    from ragloom.retrieval.postprocess import GRAPH_SOURCE
    from ragloom.retrieval.query import check_text
    from ragloom.settings import Settings
    from ragloom.stores.neo4j import Neo4jStore
    from ragloom.stores.weaviate import WeaviateStore

    settings = dataclasses.replace(Settings.from_env(), llm_base_url="", llm_model="", llm_api_key="",
                                   llm_transforms=(), summary_mode="extractive")
    started = time.perf_counter()
    # ingestion through the evaluation's own composition (idempotent), one query only
    evaluate(args.dataset, ["hybrid", "graph_rag"], [args.chunking], settings, namespace=args.namespace,
             max_queries=1, seed=args.seed, baselines=False, log=lambda m: print(f"# {m}", file=sys.stderr))
    print(f"# ingest checked: {time.perf_counter() - started:.1f}s", file=sys.stderr)
    dataset = load_dataset(args.dataset, max_queries=args.max_queries, seed=args.seed)
    ns = namespace_settings(settings, dataset.name, args.namespace)
    configs = dict(BUILTIN_CONFIGS)
    for raw in args.config:
        name, _, text = raw.partition("=")
        configs[name] = json.loads(text)
    systems = [(name, name, {}) for name in REFERENCES] + [(f"graph_rag {n}", "graph_rag", o)
                                                           for n, o in configs.items()]
    out: dict[str, Any] = {"dataset": dataset.name, "path": str(args.dataset), "namespace": args.namespace,
                           "chunking": args.chunking, "depth": args.depth, "seed": args.seed,
                           "max_queries": args.max_queries, "configs": configs, "systems": {}}
    with WeaviateStore.connect(ns) as vectors, Neo4jStore.connect(ns) as graph, \
            Ragloom(ns, vectors=Memo(vectors), graph=graph, embedder=Memo(make_embedder(ns), ("encode",)),
                    nlp=MemoNlp(load_nlp(ns.spacy_model, gemm=ns.spacy_gemm)), llm=None) as rag:
        for label, strategy, options in systems:
            started = time.perf_counter()
            base = parse_query(text=dataset.queries[0].text, strategy=strategy, chunking=args.chunking,
                               k=args.depth, options={**DEFAULT_QUERY_OPTIONS, **options})
            per_query = {}
            for query in dataset.queries:
                try:
                    found = rag.retrieve(base.replace(text=check_text(query.text)))
                except RagloomError as e:
                    per_query[query.query_id] = {"hits": [], "error": str(e)}
                    continue
                per_query[query.query_id] = {
                    "hits": [dataclasses.astuple(h) for h in hits_of(found.items)],
                    "scores": [round(float(i.score), 6) for i in found.items
                               if i.metadata.get("source") != GRAPH_SOURCE],
                    "graph": found.metadata.details.get("graph"), "fallbacks": found.metadata.fallbacks}
            out["systems"][label] = per_query
            print(f"# {label}: {len(per_query)} queries, {time.perf_counter() - started:.1f}s", file=sys.stderr)
        # the adaptive router's features, as the strategy computes them at query time (ragloom router train)
        out["features"] = {q.query_id: [round(float(v), 6) for v in query_features(rag.context, args.chunking, q.text)]
                           for q in dataset.queries}
    Path(args.out).write_text(json.dumps(out))
    return 0


# analysing --------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class SetRun:
    name: str
    level: str
    dataset: Any
    systems: dict[str, dict[str, dict[str, Any]]]
    query_ids: list[str]


def load_run(path: Path) -> SetRun:
    from ragloom.evaluation.datasets import load_dataset

    run = json.loads(path.read_text())
    dataset = load_dataset(run["path"], max_queries=run["max_queries"], seed=run["seed"])
    return SetRun(run["dataset"], LEVEL.get(run["dataset"], "document"), dataset, run["systems"],
                  [q.query_id for q in dataset.queries])


def scores(run: SetRun, ranked: dict[str, list[Any]]) -> dict[str, Any]:
    from ragloom.evaluation.metrics import Hit
    from ragloom.evaluation.runner import score_runs

    hits = {q: [Hit(*h) for h in ranked[q]] for q in run.query_ids}
    return score_runs(run.dataset, hits)[run.level]


def per_query_signals(run: SetRun, q: str) -> dict[str, float] | None:
    """The gate's signals for query ``q`` from the recorded lane and walk orders (None: the walk had no seed)."""
    from ragloom.retrieval.walk_gate import walk_signals

    lane, walk = run.systems["graph_rag lane"][q], run.systems["graph_rag walk"][q]
    if walk.get("graph") is None:
        return None
    return dataclasses.asdict(walk_signals(walk["graph"]["named_in_query"], lane["scores"],
                                           [h[0] for h in lane["hits"]], [h[0] for h in walk["hits"]],
                                           walk["scores"]))


def gated(run: SetRun, walk_if: Callable[[dict[str, float]], bool], lane_head: int, walk_slots: int | None
          ) -> dict[str, list[Any]]:
    """Per query: the lane's order, or (when ``walk_if`` passes) the lane/walk combination graph_rag makes."""
    from ragloom.retrieval.walk_gate import combine

    out = {}
    lane, walk = run.systems["graph_rag lane"], run.systems["graph_rag walk"]
    for q in run.query_ids:
        lane_hits = [tuple(h) for h in lane[q]["hits"]]
        signals = per_query_signals(run, q)
        if signals is None or not walk_if(signals):
            out[q] = lane_hits
            continue
        walk_hits = [tuple(h) for h in walk[q]["hits"]]
        out[q] = combine(lane_hits, walk_hits, lane_head, walk_slots, len(lane_hits), key=lambda h: h[0])
    return out


def goal_met(name: str, d_ndcg: float, r10: float, d_r5: float) -> bool:
    if name in MULTI_HOP:
        return r10 >= 0.78 and d_r5 >= 0.04
    return d_ndcg >= -0.002


def choose(points: dict[str, dict[str, dict[str, float]]], sets: Sequence[str]) -> str:
    """The rule (module docstring) over ``sets``: the most goals met, then the best mean nDCG@10 difference."""
    def mean(p: str) -> float:
        return sum(points[p][s]["d_ndcg"] for s in sets) / len(sets)

    return max(points, key=lambda p: (sum(points[p][s]["met"] for s in sets), mean(p)))


def main_analyse(args: argparse.Namespace) -> int:
    import itertools

    from ragloom.evaluation.metrics import paired_difference_ci

    runs = [load_run(Path(p)) for p in args.runs]
    candidates: dict[str, Callable[[SetRun], dict[str, list[Any]]]] = {}
    for name in runs[0].systems:
        candidates[name] = lambda run, name=name: {q: [tuple(h) for h in run.systems[name][q]["hits"]]
                                                  for q in run.query_ids}
    for grid in [json.loads(raw) for raw in args.grid] or SWEEP:
        for values in itertools.product(*grid.values()):
            point = dict(zip(grid, values, strict=True))
            label = "gate " + " ".join(f"{k}={v}" for k, v in point.items())
            rule = gate_rule(point)
            candidates[label] = lambda run, rule=rule, point=point: gated(
                run, rule, point.get("lane_head", 3), point.get("walk_slots"))
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        hybrid = scores(run, candidates["hybrid"](run))
        for label, make in candidates.items():
            s = scores(run, make(run))
            d_n = paired_difference_ci(s["ndcg@10"], hybrid["ndcg@10"], seed=13)
            d_r5 = paired_difference_ci(s["recall@5"], hybrid["recall@5"], seed=13)
            r10 = float(s["recall@10"].mean())
            table.setdefault(label, {})[run.name] = {
                "ndcg": float(s["ndcg@10"].mean()), "r5": float(s["recall@5"].mean()), "r10": r10,
                "ar5": float(s["ar@5"].mean()), "d_ndcg": d_n.mean, "d_ndcg_ci": [d_n.low, d_n.high],
                "d_r5": d_r5.mean, "d_r5_ci": [d_r5.low, d_r5.high],
                "met": goal_met(run.name, d_n.mean, r10, d_r5.mean)}
    names = [r.name for r in runs]
    print("| point | " + " | ".join(f"{n} ΔnDCG@10 vs hybrid" for n in names) + " | "
          + " | ".join(f"{n} R@5 / R@10 (ΔR@5)" for n in names if n in MULTI_HOP) + " | goals met |")
    print("| --- " * (2 + len(names) + sum(n in MULTI_HOP for n in names)) + "|")
    for label, per in table.items():
        cells = [f"{per[n]['d_ndcg']:+.4f} [{per[n]['d_ndcg_ci'][0]:+.4f}, {per[n]['d_ndcg_ci'][1]:+.4f}]"
                 for n in names]
        cells += [f"{per[n]['r5']:.3f} / {per[n]['r10']:.3f} ({per[n]['d_r5']:+.3f} [{per[n]['d_r5_ci'][0]:+.3f}, "
                  f"{per[n]['d_r5_ci'][1]:+.3f}])" for n in names if n in MULTI_HOP]
        met = sum(per[n]["met"] for n in names)
        print(f"| {label} | " + " | ".join(cells) + f" | {met}/{len(names)} |")
    points = {label: per for label, per in table.items() if label.startswith(("gate", "graph_rag"))}
    chosen = choose(points, names)
    print(f"\nchosen on all sets: {chosen}")
    lodo = {}
    for held in names:
        tuned = [n for n in names if n != held]
        pick = choose(points, tuned)
        lodo[held] = {"tuned_on": tuned, "chosen": pick, **points[pick][held]}
        p = points[pick][held]
        print(f"held out {held}: chosen on {'+'.join(tuned)}: {pick}; on {held}: ΔnDCG@10 {p['d_ndcg']:+.4f} "
              f"[{p['d_ndcg_ci'][0]:+.4f}, {p['d_ndcg_ci'][1]:+.4f}], R@5 {p['r5']:.3f} (Δ {p['d_r5']:+.3f}), "
              f"R@10 {p['r10']:.3f}, goal {'met' if p['met'] else 'not met'}")
    if args.json:
        Path(args.json).write_text(json.dumps({"table": table, "chosen": chosen, "lodo": lodo}, indent=1))
    return 0


def gate_rule(point: dict[str, Any]) -> Callable[[dict[str, float]], bool]:
    """A point's gate: the walk answers when every signal threshold the point names passes."""
    from ragloom.retrieval.walk_gate import GateThresholds, should_walk

    thresholds = GateThresholds(**{k: v for k, v in point.items() if k not in COMBINE_KNOBS})
    return lambda signals: should_walk(signals, thresholds)


def main_route(args: argparse.Namespace) -> int:
    """Item 2: the learned router trained leave-one-dataset-out over dense, bm25, hybrid and graph_rag (the
    ``--graph-rag`` configuration), routing only, document nDCG@10; ADR-003's complex-query figures on MuSiQue."""
    import numpy as np

    from ragloom.evaluation.metrics import choose_with_evidence, clearly_better, paired_difference_ci
    from ragloom.evaluation.routing_train import cross_validate, make_model, table
    from ragloom.retrieval.routing.router import LearnedRouter, RuleRouter

    strategies = ["dense", "bm25", "hybrid", "graph_rag"]
    label = {"dense": "dense", "bm25": "bm25", "hybrid": "hybrid", "graph_rag": f"graph_rag {args.graph_rag}"}
    rows, per_metric = [], {}
    for path in args.runs:
        raw = json.loads(Path(path).read_text())
        run = load_run(Path(path))
        if args.gate:  # graph_rag as that simulated gate point (``analyse``'s combination of lane and walk)
            point = json.loads(args.gate)
            ranked = gated(run, gate_rule(point), point.get("lane_head", 3), point.get("walk_slots"))
            run.systems["graph_rag gate"] = {q: {"hits": ranked[q]} for q in run.query_ids}
            label["graph_rag"] = "graph_rag gate"
        doc = {s: _document_scores(run, label[s]) for s in strategies}
        query_ids = sorted(run.dataset.qrels)
        texts = {q.query_id: q.text for q in run.dataset.queries}
        for i, q in enumerate(query_ids):
            rows.append({"dataset": run.name, "query_id": q, "text": texts[q], "features": raw["features"][q],
                         "scores": {s: float(doc[s]["ndcg@10"][i]) for s in strategies}})
        per_metric[run.name] = doc
    report = cross_validate(rows, strategies, seed=args.seed, by_dataset=True)
    print(table(report))
    # the picks again, to read other metrics of the routed strategy (cross_validate keeps only the means)
    X = np.asarray([r["features"] for r in rows])
    Y = np.asarray([[r["scores"][s] for s in strategies] for r in rows])
    names = np.asarray([r["dataset"] for r in rows])
    picks = np.zeros(len(rows), dtype=int)
    for held in sorted(set(names)):
        router = LearnedRouter(make_model(args.seed).fit(X[names != held], Y[names != held]), strategies)
        for i in np.flatnonzero(names == held):
            picks[i] = strategies.index(router.route("", X[i], strategies)[0])
    chain = ["hybrid", "graph_rag", "dense", "bm25"]  # the default chain's order (the rules' fallback is its first)

    def rule_picks_of(rules: RuleRouter) -> np.ndarray:
        return np.asarray([strategies.index(rules.route(r["text"], X[i], chain)[0]) for i, r in enumerate(rows)])

    rule_picks = rule_picks_of(RuleRouter())
    n = np.arange(len(rows))
    # The rules' one threshold held out too: each set routed by the variant chosen on the other two sets' queries
    # (pooled), so no rules figure below is scored on the set that chose it. A variant replaces the shipped one
    # only when it beats it there with the paired interval above zero (``choose_with_evidence``): without
    # MuSiQue the variants differ in the fifth decimal, and the largest of such means once chose the fold's router.
    variants = {rules: rule_picks_of(rules) for rules in (RuleRouter(min_capitalized=c, needs_wh=wh)
                                                          for c in (0, 1, 2, 3) for wh in (True, False))}
    lodo_rule_picks = np.zeros(len(rows), dtype=int)
    for held in sorted(set(names)):
        train = names != held
        best = choose_with_evidence({v: Y[n[train], picks_v[train]] for v, picks_v in variants.items()},
                                    RuleRouter(), seed=args.seed)
        print(f"rules (LODO): without {held} the variant min_capitalized={best.min_capitalized} "
              f"needs_wh={best.needs_wh} is chosen (" + ", ".join(
                  f"{v.min_capitalized}/{v.needs_wh} {Y[n[train], c[train]].mean():.4f}" for v, c in variants.items())
              + ")")
        lodo_rule_picks[names == held] = variants[best][names == held]
        # what the choice rests on: the variants the training queries cannot tell from the chosen one (paired
        # interval containing zero), each with its figure on the held-out set, so a fold decided by noise shows
        held_rows = names == held
        held_best = Y[held_rows].mean(axis=0).max()
        chosen = Y[n[train], variants[best][train]]
        alike = [v for v, c in variants.items() if v == best or not (
            clearly_better(Y[n[train], c[train]], chosen, seed=args.seed)
            or clearly_better(chosen, Y[n[train], c[train]], seed=args.seed))]
        print(f"  variants alike on the training sets, on {held} (− best single strategy): " + ", ".join(
            f"{v.min_capitalized}/{v.needs_wh} {Y[n[held_rows], variants[v][held_rows]].mean() - held_best:+.4f}"
            for v in alike))
    routers = {"learned (LODO)": picks, "rules": rule_picks, "rules (LODO)": lodo_rule_picks,
               "always graph_rag": np.full(len(rows), strategies.index("graph_rag"))}
    oracle = Y.max(axis=1)
    hybrid = Y[:, strategies.index("hybrid")]
    sets = sorted(set(names))
    print("\n| router | " + " | ".join(f"{d} nDCG@10 (− best single strategy)" for d in sets)
          + " | pooled − hybrid | routing accuracy (ties right) |")
    print("| --- " * (3 + len(sets)) + "|")
    summary: dict[str, Any] = {}
    for name, chosen in routers.items():
        routed = Y[n, chosen]
        cells = []
        for d in sets:
            mask = names == d
            means = Y[mask].mean(axis=0)
            best = int(means.argmax())
            diff = paired_difference_ci(routed[mask], Y[mask, best], seed=args.seed)
            cells.append(f"{routed[mask].mean():.4f} ({diff.mean:+.4f} [{diff.low:+.4f}, {diff.high:+.4f}] vs "
                         f"{strategies[best]})")
        pooled = paired_difference_ci(routed, hybrid, seed=args.seed)
        accuracy = float(np.isclose(routed, oracle).mean())
        summary[name] = {"pooled_minus_hybrid": pooled.as_dict(), "routing_accuracy": accuracy}
        print(f"| {name} | " + " | ".join(cells) + f" | {pooled.mean:+.4f} [{pooled.low:+.4f}, {pooled.high:+.4f}] | "
              f"{accuracy:.2f} |")
    for d in sets:
        mask = names == d
        print(f"{d} single strategies: " + ", ".join(f"{s} {Y[mask, j].mean():.4f}" for j, s in enumerate(strategies))
              + f"; oracle {oracle[mask].mean():.4f}; picks " + "; ".join(
                  f"{r}: " + "/".join(str(int((c[mask] == j).sum())) for j in range(len(strategies)))
                  for r, c in routers.items()))
    for multi in sorted(set(names) & MULTI_HOP):
        mask = np.flatnonzero(names == multi)
        doc = per_metric[multi]
        for metric in ("recall@5", "ar@5", "recall@10", "ndcg@10"):
            for rname, chosen in routers.items():
                a = np.asarray([doc[strategies[chosen[i]]][metric][k] for k, i in enumerate(mask)])
                cells = []
                for ref in ("dense", "hybrid"):
                    base = doc[ref][metric]
                    diff = paired_difference_ci(a, base, seed=args.seed)
                    rel = (a.mean() / base.mean() - 1) * 100 if base.mean() > 0 else float("nan")
                    cells.append(f"vs {ref} {base.mean():.3f}: {diff.mean:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}] "
                                 f"({rel:+.0f} %)")
                print(f"ADR-003 {multi} {metric} {rname}: {a.mean():.3f}; " + "; ".join(cells))
    if args.json:
        Path(args.json).write_text(json.dumps({"report": report, "routers": summary}, indent=1))
    return 0


def _document_scores(run: SetRun, system: str) -> dict[str, Any]:
    from ragloom.evaluation.metrics import Hit, document_scores

    hits = {q: [Hit(*h) for h in run.systems[system][q]["hits"]] for q in run.query_ids}
    return document_scores(hits, run.dataset.qrels)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--dataset", required=True)
    c.add_argument("--namespace", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--chunking", default="recursive")
    c.add_argument("--depth", type=int, default=30)
    c.add_argument("--seed", type=int, default=13)
    c.add_argument("--max-queries", type=int, default=None)
    c.add_argument("--config", action="append", default=[], help="NAME=JSON graph_rag options; repeatable")
    a = sub.add_parser("analyse")
    a.add_argument("runs", nargs="+")
    a.add_argument("--json", default="")
    a.add_argument("--grid", action="append", default=[],
                   help="JSON {knob: [values]}, repeatable: gates simulated over each grid's product (knobs of "
                        "GateThresholds, lane_head, walk_slots); default SWEEP")
    r = sub.add_parser("route")
    r.add_argument("runs", nargs="+")
    r.add_argument("--graph-rag", default="default", help="the collected graph_rag configuration routed to")
    r.add_argument("--gate", default="", help="JSON point: graph_rag as this simulated gate instead")
    r.add_argument("--seed", type=int, default=13)
    r.add_argument("--json", default="")
    args = parser.parse_args(argv)
    return {"collect": collect, "analyse": main_analyse, "route": main_route}[args.action](args)


if __name__ == "__main__":
    raise SystemExit(main())
