"""`ragloom router train`: learn the router from evaluation runs, with a cross-validated report.

Input: the JSON of one or more `ragloom eval` runs (same strategies in each). Each run's per-query
document-level nDCG@10 per strategy is the target; the features are computed here against the run's own
collections (its ``collection_prefix``), exactly as the adaptive strategy computes them at query time.

The report scores routing alone (no corrective retry): for each query the strategy the router picks is
credited with that strategy's measured nDCG@10. Cross-validated: a query is routed by a model that never saw
it. Also reported: every single strategy, the rule router, the oracle (best strategy per query), routing
accuracy against the oracle (a pick counts as right when it attains the query's best score) and the
confusion matrix (oracle's best strategy x pick; on a tie the pick's row when it is among the best).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragloom import files
from ragloom.api import Ragloom
from ragloom.errors import ConfigError
from ragloom.evaluation.datasets import load_dataset
from ragloom.evaluation.metrics import bootstrap_ci, paired_difference_ci
from ragloom.retrieval.adaptive import DEFAULT_CHAIN, query_features
from ragloom.retrieval.routing.features import FEATURE_VERSION
from ragloom.retrieval.routing.router import LearnedRouter, RuleRouter, data_hash
from ragloom.settings import Settings

METRIC = "ndcg@10"


def make_model(seed: int = 13) -> Any:
    from sklearn.ensemble import ExtraTreesRegressor

    return ExtraTreesRegressor(n_estimators=40, min_samples_leaf=5, max_features=0.5, random_state=seed, n_jobs=1)


def load_rows(eval_json: Path, settings: Any, log: Any = print) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per query of an eval run: dataset, query id, text, features, per-strategy nDCG@10."""

    run = json.loads(Path(eval_json).read_text(encoding="utf-8"))
    config = run["config"]
    chunking = config["chunkings"][0]
    strategies = [s for s in config["strategies"] if f"{s}/{chunking}" in run["per_query"] and s != "adaptive"]
    if len(strategies) < 2:
        raise ConfigError(f"{eval_json}: needs per-query results of at least two strategies on {chunking}")
    dataset = load_dataset(config["dataset_path"], max_queries=config["max_queries"],
                           corpus_limit=config["corpus_limit"], seed=config["seed"])
    texts = {q.query_id: q.text for q in dataset.queries}
    ids = run["per_query"][f"{strategies[0]}/{chunking}"]["document"]["query_ids"]
    scores = {s: run["per_query"][f"{s}/{chunking}"]["document"][METRIC] for s in strategies}
    ns = dataclasses.replace(settings, collection_prefix=config["collection_prefix"],
                             graph_namespace=config["graph_namespace"])
    rows = []
    with Ragloom(ns) as rag:
        for i, qid in enumerate(ids):
            vector = query_features(rag.context, chunking, texts[qid])
            rows.append({"dataset": run["dataset"], "query_id": qid, "text": texts[qid],
                         "features": [round(float(v), 6) for v in vector],
                         "scores": {s: float(scores[s][i]) for s in strategies}})
    log(f"{run['dataset']}: {len(rows)} queries, strategies {', '.join(strategies)}")
    return rows, strategies


def cross_validate(rows: Sequence[dict[str, Any]], strategies: list[str], folds: int = 5, seed: int = 13,
                   resamples: int = 1000, by_dataset: bool = False) -> dict[str, Any]:
    """Routing scored on queries the model never saw: ``folds`` shuffled folds, or with ``by_dataset`` one fold
    per dataset (each set routed by a model trained on the other sets only)."""
    from sklearn.model_selection import KFold, LeaveOneGroupOut

    X = np.asarray([r["features"] for r in rows], dtype=float)
    Y = np.asarray([[r["scores"][s] for s in strategies] for r in rows], dtype=float)
    names = np.asarray([r["dataset"] for r in rows])
    if by_dataset and len(set(names)) < 2:
        raise ConfigError("leave-one-dataset-out needs rows of at least two datasets")
    splits = LeaveOneGroupOut().split(X, groups=names) if by_dataset else \
        KFold(folds, shuffle=True, random_state=seed).split(X)
    picks = np.zeros(len(rows), dtype=int)
    for train, test in splits:
        model = make_model(seed).fit(X[train], Y[train])
        router = LearnedRouter(model, strategies)
        for i in test:
            picks[i] = strategies.index(router.route("", X[i], strategies)[0])
    rules = RuleRouter()
    # the rules fall back to the chain's first strategy: offer the candidates in the default chain's order
    ordered = [s for s in DEFAULT_CHAIN if s in strategies] + [s for s in strategies if s not in DEFAULT_CHAIN]
    rule_picks = np.asarray([strategies.index(rules.route(r["text"], X[i], ordered)[0])
                             for i, r in enumerate(rows)])
    n = np.arange(len(rows))
    adaptive, by_rules, oracle = Y[n, picks], Y[n, rule_picks], Y.max(axis=1)
    correct = np.isclose(Y[n, picks], oracle)
    oracle_first = np.where(correct, picks, Y.argmax(axis=1))  # a tie the pick is part of counts as agreement
    confusion = np.zeros((len(strategies), len(strategies)), dtype=int)
    for o, p in zip(oracle_first, picks, strict=True):
        confusion[o, p] += 1

    def summary(mask: np.ndarray) -> dict[str, Any]:
        means = {s: float(Y[mask, j].mean()) for j, s in enumerate(strategies)}
        best = max(means, key=means.get)
        diff = paired_difference_ci(adaptive[mask], Y[mask, strategies.index(best)], resamples, seed)
        return {"queries": int(mask.sum()), "single": means, "best_single": best,
                "adaptive_cv": bootstrap_ci(adaptive[mask], resamples, seed).as_dict(),
                "adaptive_minus_best": diff.as_dict(), "rules": float(by_rules[mask].mean()),
                "oracle": float(oracle[mask].mean()), "routing_accuracy": float(correct[mask].mean()),
                "picks": {s: int((picks[mask] == j).sum()) for j, s in enumerate(strategies)}}

    datasets = sorted(set(names))
    return {"metric": f"document {METRIC}", "folds": "by dataset" if by_dataset else folds, "seed": seed,
            "strategies": strategies,
            "pooled": summary(np.ones(len(rows), dtype=bool)),
            "per_dataset": {d: summary(names == d) for d in datasets},
            "confusion": {"rows_oracle_cols_pick": strategies, "matrix": confusion.tolist()},
            "note": "routing only (no corrective retry); ties: a pick is right when it attains the query's best"}


def train(eval_jsons: Sequence[Path], settings: Any, out: Path, folds: int = 5, seed: int = 13,
          log: Any = print, by_dataset: bool = False) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    strategies: list[str] | None = None
    for path in eval_jsons:
        got, names = load_rows(path, settings, log)
        if strategies is not None and names != strategies:
            raise ConfigError(f"{path}: strategies {names} differ from the other runs' {strategies}")
        strategies = names
        rows += got
    assert strategies is not None
    report = cross_validate(rows, strategies, folds, seed, by_dataset=by_dataset)
    X = np.asarray([r["features"] for r in rows], dtype=float)
    Y = np.asarray([[r["scores"][s] for s in strategies] for r in rows], dtype=float)
    card = {"trained_on": [str(p) for p in eval_jsons], "queries": len(rows), "data_sha256": data_hash(
        [{k: r[k] for k in ("dataset", "query_id", "features", "scores")} for r in rows]),
        "feature_version": FEATURE_VERSION, "cv": report["pooled"]}
    model_path = LearnedRouter(make_model(seed).fit(X, Y), strategies, card).save(out)
    report["model"] = str(model_path)
    files.write_text(model_path.with_name(model_path.stem + "_cv.json"), json.dumps(report, indent=1))
    return report


def compare(eval_jsons: Sequence[Path], system: str = "adaptive", resamples: int = 1000,
            seed: int = 13) -> dict[str, Any]:
    """Pool ``ragloom eval`` runs' per-query document nDCG@10 and set ``system`` (a strategy name, on each
    run's first chunking) against every other strategy the runs share: means per run and pooled, and the paired
    difference from the best other strategy, pooled and per run. No training: for the rule or LLM router, or a
    router trained on other queries."""

    runs = []
    for path in eval_jsons:
        run = json.loads(Path(path).read_text(encoding="utf-8"))
        chunking = run["config"]["chunkings"][0]
        systems = {key.split("/")[0]: value["document"][METRIC] for key, value in run["per_query"].items()
                   if key.endswith(f"/{chunking}")}
        if system not in systems:
            raise ConfigError(f"{path}: no per-query results for {system}/{chunking}")
        runs.append((run["dataset"], systems))
    shared = [s for s in runs[0][1] if all(s in systems for _, systems in runs)]
    others = [s for s in shared if s != system]
    if not others:
        raise ConfigError(f"the runs share no strategy to set {system} against")

    def summary(parts: list[dict[str, list[float]]]) -> dict[str, Any]:
        scores = {s: np.concatenate([np.asarray(p[s], dtype=float) for p in parts]) for s in shared}
        means = {s: float(v.mean()) for s, v in scores.items()}
        best = max(others, key=means.get)
        return {"queries": int(scores[system].size), "means": means, "best_other": best,
                "difference": paired_difference_ci(scores[system], scores[best], resamples, seed).as_dict()}

    return {"metric": f"document {METRIC}", "system": system, "strategies": shared,
            "pooled": summary([systems for _, systems in runs]),
            "per_dataset": {name: summary([systems]) for name, systems in runs}}


def compare_table(report: dict[str, Any]) -> str:
    names, system = report["strategies"], report["system"]
    lines = [f"{report['metric']}: {system} against the best other strategy (paired 95% CI)",
             f"{'set':<12}{'n':>6} " + " ".join(f"{s:>10}" for s in names) + f"  {system}-best [CI]"]
    for name, s in [("pooled", report["pooled"]), *report["per_dataset"].items()]:
        d = s["difference"]
        lines.append(f"{name:<12}{s['queries']:>6} " + " ".join(f"{s['means'][x]:>10.3f}" for x in names) +
                     f"  {d['mean']:+.4f} [{d['low']:+.4f}, {d['high']:+.4f}] vs {s['best_other']}")
    return "\n".join(lines)


def table(report: dict[str, Any]) -> str:
    strategies = report["strategies"]
    folds = "leave-one-dataset-out" if report["folds"] == "by dataset" else f"{report['folds']}-fold CV"
    lines = [f"{report['metric']}, {folds} ({report['note']})",
             f"{'set':<12}{'n':>5} " + " ".join(f"{s:>8}" for s in strategies) +
             f" {'rules':>7} {'adaptive [95% CI]':>24} {'oracle':>7} {'route acc':>9}  adaptive-best [CI]"]
    for name, s in [("pooled", report["pooled"]), *report["per_dataset"].items()]:
        a, d = s["adaptive_cv"], s["adaptive_minus_best"]
        lines.append(f"{name:<12}{s['queries']:>5} " + " ".join(f"{s['single'][x]:>8.3f}" for x in strategies) +
                     f" {s['rules']:>7.3f} {a['mean']:>8.3f} [{a['low']:.3f},{a['high']:.3f}]"
                     f" {s['oracle']:>7.3f} {s['routing_accuracy']:>9.2f}  {d['mean']:+.3f} [{d['low']:+.3f},"
                     f"{d['high']:+.3f}] vs {s['best_single']}")
    lines.append("confusion (rows: oracle's best, cols: pick): " + ", ".join(strategies))
    for s, row in zip(strategies, report["confusion"]["matrix"], strict=True):
        lines.append(f"  {s:<10}" + " ".join(f"{v:>6}" for v in row))
    return "\n".join(lines)


def add_router_command(subparsers: Any) -> None:
    p = subparsers.add_parser("router", help="the adaptive strategy's router")
    sub = p.add_subparsers(dest="action", required=True)
    t = sub.add_parser("train", help="train the router on `ragloom eval` runs' JSON, with a cross-validated report")
    t.add_argument("--eval", action="append", required=True, metavar="JSON",
                   help="a `ragloom eval` result (<dataset>_eval.json), repeatable; their queries are pooled")
    t.add_argument("--out", default="", help="model path (default RAGLOOM_ROUTER_MODEL in the artifacts folder, "
                   "where the adaptive strategy loads it from)")
    t.add_argument("--folds", type=int, default=5)
    t.add_argument("--seed", type=int, default=13)
    t.add_argument("--by-dataset", action="store_true", help="report leave-one-dataset-out instead of --folds: "
                   "each run's queries routed by a model trained on the other runs only")
    t.set_defaults(func=_cmd_train)
    c = sub.add_parser("compare", help="pool `ragloom eval` runs and set one strategy (adaptive) against the "
                       "best other, with a paired CI")
    c.add_argument("--eval", action="append", required=True, metavar="JSON", help="a `ragloom eval` result, "
                   "repeatable; their queries are pooled")
    c.add_argument("--system", default="adaptive", help="the strategy set against the others (default adaptive)")
    c.add_argument("--seed", type=int, default=13)
    c.set_defaults(func=_cmd_compare)


def _cmd_train(args: Any) -> int:

    settings = Settings.from_env()
    report = train([Path(p) for p in args.eval], settings, Path(args.out) if args.out else
                   settings.resolved_router_model, folds=args.folds, seed=args.seed,
                   by_dataset=args.by_dataset)
    print(table(report))
    print(f"\nmodel: {report['model']}")
    return 0


def _cmd_compare(args: Any) -> int:
    print(compare_table(compare([Path(p) for p in args.eval], args.system, seed=args.seed)))
    return 0
