"""`ragloom eval`: the retrieval-quality evaluation from the command line."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ragloom.settings import Settings

DEFAULT_STRATEGIES = "dense,bm25,hybrid,graph_rag,hierarchical"
DEFAULT_CHUNKINGS = "recursive"


def names(raw: str) -> list[str]:
    return [part.strip() for part in raw.split(",") if part.strip()]


def _cmd_eval(args: argparse.Namespace) -> int:
    from ragloom.evaluation.runner import evaluate  # deferred: the eval command loads the runner only when run

    settings = Settings.from_env()
    if args.start_stack:
        from ragloom import stack  # deferred: the eval command loads the runner only when run

        settings = stack.up(settings)
    report = evaluate(args.dataset, names(args.strategies), names(args.chunking), settings,
                      namespace=args.namespace or None, max_queries=args.max_queries, corpus_limit=args.corpus_limit,
                      depth=args.depth, seed=args.seed, resamples=args.resamples, query_options=args.options,
                      option_pairs=args.option, baselines=not args.no_baselines, transforms=names(args.transforms))
    print(report.table())
    paths = report.write(Path(args.out) if args.out else Path("eval_results"))
    print("\nwritten: " + "  ".join(str(p) for p in paths.values()))
    return 0


def add_eval_command(subparsers: Any) -> argparse.ArgumentParser:
    """Registers ``ragloom eval`` on the CLI's subparsers."""
    p = subparsers.add_parser("eval", help="measure retrieval quality on a BEIR-style dataset folder")
    p.add_argument("--dataset", required=True, help="folder with corpus.jsonl, queries.jsonl, qrels.tsv "
                                                    "(and passages.jsonl + qrels_passages.tsv)")
    p.add_argument("--strategies", default=DEFAULT_STRATEGIES,
                   help=f"retrieval strategies, comma-separated (default {DEFAULT_STRATEGIES})")
    p.add_argument("--chunking", default=DEFAULT_CHUNKINGS, help="chunkings, comma-separated (any registered chunker)")
    p.add_argument("--max-queries", type=int, default=None, help="a seeded sample of this many queries")
    p.add_argument("--corpus-limit", type=int, default=None,
                   help="at most this many documents (the sampled queries' gold documents always kept)")
    p.add_argument("--out", default="eval_results", help="folder for the CSV, JSON, text table and PNG chart")
    p.add_argument("--namespace", default="", help="collection prefix / graph namespace (default Eval<Dataset>)")
    p.add_argument("--depth", type=int, default=30, help="chunks retrieved per query (default 30)")
    p.add_argument("--seed", type=int, default=13, help="seed of the query/corpus sample and the bootstrap")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument("--options", default="", metavar="JSON",
                   help='retrieval options as JSON, e.g. \'{"dedup": false}\', each given to the strategies that '
                        'declare it (`ragloom strategies`)')
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a retrieval option, repeatable, e.g. --option alpha=0.3 (--option wins over --options)")
    p.add_argument("--transforms", default="",
                   help="query transforms, comma-separated (reformulate, multi_query, hyde, step_back, decompose, "
                        "prf): each strategy also runs as <strategy>+<transform>; model ones need RAGLOOM_LLM_*")
    p.add_argument("--no-baselines", action="store_true", help="skip the whole-document BM25 and dense baselines")
    p.add_argument("--start-stack", action="store_true", help="start the local Weaviate + Neo4j first if needed")
    p.set_defaults(func=_cmd_eval)
    return p

