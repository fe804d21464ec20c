"""graph_rag option sweeps on an evaluation dataset already ingested by `ragloom eval` (same namespace).

    python benchmarks/graph_rag_sweep.py --dataset ../shared/data/musique --namespace PprMusique \\
        --grid '{"passage_weight": [0.01, 0.05, 0.2, 0.5]}' --grid '{"damping": [0.3, 0.5, 0.7]}'

Each ``--grid`` is a JSON object of option -> list of values, swept one grid at a time over the product of
its lists (other options at their defaults, or ``--base``). The references, dense and hybrid on the same
chunks, run once in the same process. Prints one row per point: R@2, R@5, R@10, AR@5, nDCG@10 (document
level, or passage level with ``--level passage``) and the paired differences (95% bootstrap CI) of R@5 and
nDCG@10 from dense and from hybrid. ``--json`` writes every row.

Weaviate answers and spaCy parses are memoised per query within the run (the sweep varies the graph walk,
not the lanes), so a point costs the walk alone; latencies printed are therefore not query latencies
(benchmarks/query_latency.py measures those).
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


class Memo:
    """Calls of ``target``'s query methods remembered by their arguments (items copied on every answer)."""

    def __init__(self, target, methods=("hybrid", "near_vector", "bm25", "fetch")) -> None:
        self._target, self._methods, self._seen = target, methods, {}

    def __getattr__(self, name):
        value = getattr(self._target, name)
        if name not in self._methods:
            return value

        def remembered(*args, **kwargs):
            key = (name, repr(args), repr(sorted(kwargs.items())))
            if key not in self._seen:
                self._seen[key] = value(*args, **kwargs)
            return copy.deepcopy(self._seen[key])

        return remembered


class MemoNlp:
    """A spaCy pipeline whose parses are remembered by text."""

    def __init__(self, nlp) -> None:
        self._nlp, self._seen, self.Defaults = nlp, {}, nlp.Defaults

    def __call__(self, text):
        if text not in self._seen:
            self._seen[text] = self._nlp(text)
        return self._seen[text]

    def __getattr__(self, name):  # make_doc, pipe_names...: the pipeline's own
        return getattr(self._nlp, name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--namespace", default="")
    parser.add_argument("--chunking", default="recursive")
    parser.add_argument("--max-queries", type=int, default=None)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--depth", type=int, default=30)
    parser.add_argument("--level", default="document", choices=("document", "passage"))
    parser.add_argument("--strategy", default="graph_rag")
    parser.add_argument("--references", default="dense,hybrid")
    parser.add_argument("--base", default="{}", help="options every point starts from (JSON; not the references)")
    parser.add_argument("--grid", action="append", default=[], help="JSON {option: [values]}; repeatable")
    parser.add_argument("--json", default="", help="write the rows here")
    args = parser.parse_args(argv)

    from ragloom.api import Ragloom
    from ragloom.embedding import make_embedder
    from ragloom.evaluation.datasets import load_dataset
    from ragloom.evaluation.metrics import bootstrap_ci, paired_difference_ci
    from ragloom.evaluation.runner import DEFAULT_QUERY_OPTIONS, _run_strategy, namespace_settings
    from ragloom.extraction import load_nlp
    from ragloom.settings import Settings
    from ragloom.stores.neo4j import Neo4jStore
    from ragloom.stores.weaviate import WeaviateStore

    dataset = load_dataset(args.dataset, max_queries=args.max_queries, seed=args.seed)
    settings = namespace_settings(Settings.from_env(), dataset.name, args.namespace or None)
    base = {**DEFAULT_QUERY_OPTIONS, **json.loads(args.base)}
    points: list[tuple[str, dict]] = [("defaults", {})]
    for raw in args.grid:
        grid = json.loads(raw)
        for values in itertools.product(*grid.values()):
            point = dict(zip(grid, values, strict=True))
            points.append((" ".join(f"{k}={v}" for k, v in point.items()), point))
    quiet = lambda message: None  # noqa: E731
    rows = []
    with WeaviateStore.connect(settings) as vectors, Neo4jStore.connect(settings) as graph, \
            Ragloom(settings, vectors=Memo(vectors), graph=graph, embedder=Memo(make_embedder(settings), ("encode",)),
                    nlp=MemoNlp(load_nlp(settings.spacy_model, gemm=settings.spacy_gemm))) as rag:
        refs = {}
        for name in [n for n in args.references.split(",") if n]:
            started = time.perf_counter()
            refs[name] = _run_strategy(rag, dataset, name, args.chunking, args.depth, DEFAULT_QUERY_OPTIONS, quiet)
            print(f"# {name}: {time.perf_counter() - started:.1f}s", file=sys.stderr)
        header = (f"| {'system':48} | R@2 | R@5 | R@10 | AR@5 | nDCG@10 | "
                  + " | ".join(f"ΔR@5 vs {r}" for r in refs) + " | "
                  + " | ".join(f"ΔnDCG@10 vs {r}" for r in refs) + " | ms p50 |")
        print(header)
        print("| --- " * (header.count("|") - 1) + "|")

        def row(label: str, result) -> None:
            if result.error:
                print(f"| {label} | error: {result.error} |")
                return
            s = result.scores[args.level]
            cells = [f"{bootstrap_ci(s[m]).mean:.3f}" for m in ("recall@2", "recall@5", "recall@10", "ar@5", "ndcg@10")]
            deltas = []
            for metric in ("recall@5", "ndcg@10"):
                for ref in refs.values():
                    d = paired_difference_ci(s[metric], ref.scores[args.level][metric], seed=args.seed)
                    deltas.append(f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}]")
            latency = sorted(result.latency_ms)[len(result.latency_ms) // 2]
            print(f"| {label:48} | " + " | ".join(cells + deltas) + f" | {latency:.0f} |", flush=True)
            rows.append({"system": label, **{m: float(s[m].mean()) for m in s}, "latency_ms_p50": latency,
                         "query_errors": result.query_errors})

        for name, result in refs.items():
            row(f"{name} (reference)", result)
        for label, point in points:
            started = time.perf_counter()
            result = _run_strategy(rag, dataset, args.strategy, args.chunking, args.depth, {**base, **point}, quiet)
            print(f"# {label}: {time.perf_counter() - started:.1f}s", file=sys.stderr)
            row(f"{args.strategy} {label}", result)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
