"""The `ragloom` command: stack lifecycle, settings, queries and evaluation."""

from __future__ import annotations

import argparse
import json
import sys

from ragloom.errors import RagloomError
from ragloom.settings import Settings


def _cmd_stack(args: argparse.Namespace) -> int:
    from ragloom import stack

    if args.action == "up":
        stack.up()
    elif args.action == "down":
        stopped = stack.down()
        for name, was in stopped.items():
            print(f"{name}: {'stopped' if was else 'was not running'}")
    report = stack.status()
    if args.action == "status" or args.json:
        print(json.dumps(report, indent=2) if args.json else _format_status(report))
        if args.action == "status" and not all(report[s]["ready"] for s in ("weaviate", "neo4j")):
            return 3
    return 0


def _format_status(report: dict) -> str:
    lines = []
    for name in ("weaviate", "neo4j"):
        r = report[name]
        state = "ready" if r["ready"] else "down"
        where = r.get("url") or r.get("uri")
        lines.append(f"{name:9} {state:6} {where}  version={r['version']}  pid={r['managed_pid']}")
    lines.append(f"data: {report['data_dir']}   cache: {report['cache_dir']}")
    return "\n".join(lines)


def _cmd_settings(args: argparse.Namespace) -> int:
    for key, value in Settings.from_env().public_view().items():
        print(f"{key} = {value}")
    return 0


def _cmd_query(args: argparse.Namespace) -> int:
    import time

    from ragloom.api import Ragloom
    from ragloom.retrieval.filters import parse_filters
    from ragloom.types import Scope

    parse_filters(args.filter or None)  # a malformed filter or scope fails before anything connects or loads
    scope = Scope.from_path(args.scope)
    started = time.perf_counter()
    with Ragloom.from_settings(Settings.from_env()) as rag:
        rag.warm(args.strategy)
        load_ms = (time.perf_counter() - started) * 1000
        result = rag.query(args.text, strategy=args.strategy, k=args.k, filters=args.filter or None,
                           scope=scope, chunking=args.chunking)
    result.metadata.setdefault("timings_ms", {})["connect_and_load"] = round(load_ms, 1)
    if args.json:
        print(json.dumps({"query": result.query, "metadata": result.metadata,
                          "items": [item.__dict__ for item in result.items]}, indent=2, default=str))
        return 0
    meta = result.metadata
    print(f"query: {result.query}")
    print(f"strategy: {meta.get('strategy')}  lanes: {meta.get('lanes_run')}  fallbacks: {meta.get('fallbacks') or '-'}"
          f"  query: {meta['timings_ms'].get('total', 0):.0f} ms (connect + model load before it: "
          f"{meta['timings_ms']['connect_and_load']:.0f} ms)")
    if meta.get("abstained"):
        print(f"abstained: {meta.get('abstain_reason')}")
    for item in result.items:
        where = " > ".join(item.heading_path) or item.metadata.get("title", "")
        text = " ".join(item.text.split())
        print(f"{item.rank:>2}. [{item.score:.3f}] {item.document_id}  {where}")
        print(f"    {text[:300]}{'...' if len(text) > 300 else ''}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragloom", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("stack", help="provision, start, stop or inspect the local Weaviate + Neo4j")
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("--json", action="store_true", help="print status as JSON")
    p.set_defaults(func=_cmd_stack)

    p = sub.add_parser("query", help="retrieve from what was materialized")
    p.add_argument("text")
    p.add_argument("--strategy", default="hybrid", help="dense | bm25 | hybrid | graph_rag | hierarchical")
    p.add_argument("-k", type=int, default=5)
    p.add_argument("--filter", default="", help='metadata filter as JSON, e.g. \'{"status": "published"}\'')
    p.add_argument("--scope", default="", help="tenant/user/chat[/agent]; default: shared only")
    p.add_argument("--chunking", default="recursive", help="which chunking strategy's collection to query")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_query)

    from ragloom.evaluation.cli import add_eval_command

    add_eval_command(sub)

    p = sub.add_parser("settings", help="print the resolved settings (secrets masked)")
    p.set_defaults(func=_cmd_settings)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except RagloomError as e:
        print(f"ragloom: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
