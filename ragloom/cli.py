"""The `ragloom` command: stack lifecycle, settings, queries and evaluation."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from ragloom.errors import RagloomError
from ragloom.settings import Settings
from ragloom.types import HEADING_SEPARATOR


def _cmd_stack(args: argparse.Namespace) -> int:
    from ragloom import stack  # deferred: each command loads only what it needs (`ragloom --help` stays instant)

    if args.profile == "cluster":
        return _cmd_cluster(args)
    if args.action == "up":
        stack.up(llm=args.llm)
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


def _cmd_metadata(args: argparse.Namespace) -> int:
    """``metadata migrate``: every chunk collection of the prefix onto the metadata layout, one line each."""
    # deferred: each command loads only what it needs (`ragloom --help` stays instant)
    from ragloom.stores.weaviate import WeaviateStore
    from ragloom.stores.weaviate.migrate import STAGING  # deferred: as above

    store = WeaviateStore.connect(Settings.from_env())
    try:
        strategies = sorted({s.removesuffix(STAGING) for s in store.chunk_strategies()})
        for strategy in strategies:
            legacy = store.legacy_properties(strategy)
            if args.dry_run:
                print(f"{strategy}: " + (", ".join(f"{p} {t}" for p, t in sorted(legacy.items())) or "in the layout"))
                continue
            report = store.migrate_metadata(strategy)
            print(f"{strategy}: " + (f"retyped {', '.join(sorted(report.retyped))}; copied {report.copied} objects"
                                     if report.changed else "in the layout, nothing to do"))
            for chunk_id, why in list(report.left_out.items())[:20]:
                print(f"  left out of {chunk_id}: {why}")
    finally:
        store.close()
    return 0


def _cmd_cluster(args: argparse.Namespace) -> int:
    """The cluster profile: Postgres, Redis, Celery workers, a code server and a 3-node Weaviate on loopback."""
    from ragloom import stack  # deferred: each command loads only what it needs (`ragloom --help` stays instant)
    from ragloom.stack import cluster  # deferred: as above

    settings = Settings.from_env()
    if args.action == "up":
        settings = cluster.up(stack.up(settings, llm=args.llm))
        print("# to use the cluster profile in this shell:")
        for key, value in cluster.client_env(settings).items():
            shown = "***" if "PASSWORD" in key else value.replace(settings.redis_password, "***")
            print(f"export {key}={shown}")
        print("# (secrets: see RAGLOOM_POSTGRES_PASSWORD / RAGLOOM_REDIS_PASSWORD files under the stack dir)")
    elif args.action == "down":
        for name, was in cluster.down(settings).items():
            print(f"{name}: {'stopped' if was else 'was not running'}")
    else:
        print(json.dumps(cluster.status(settings), indent=2))
    return 0


def _format_status(report: dict) -> str:
    lines = []
    for name in ("weaviate", "neo4j"):
        r = report[name]
        state = "ready" if r["ready"] else "down"
        where = r.get("url") or r.get("uri")
        lines.append(f"{name:9} {state:6} {where}  version={r['version']}  pid={r['managed_pid']}")
    llm = report.get("llm") or {}
    if llm.get("url") or llm.get("managed_pid"):
        state = {True: "ready", False: "down", None: "remote"}[llm.get("ready")]
        lines.append(f"{'llm':9} {state:6} {llm.get('url')}  model={llm.get('model')}  pid={llm.get('managed_pid')}")
    lines.append(f"data: {report['data_dir']}   cache: {report['cache_dir']}")
    return "\n".join(lines)


def _cmd_ingest(args: argparse.Namespace) -> int:
    """Hands over to the Dagster layer, which runs the job (pipelines/ingest.py says why): the core never imports
    dagster, so it starts `python -m pipelines.ingest` with the same arguments, checked here already by the same
    declaration (add_ingest_arguments), and exits as it did."""
    import subprocess  # deferred: each command loads only what it needs (`ragloom --help` stays instant)

    return subprocess.call([sys.executable, "-m", "pipelines.ingest", *args.argv[1:]])


INGEST_DESCRIPTION = ("Run the ingest job once (documents, chunks, vectors, graph) and record the run in the Dagster "
                      "instance of DAGSTER_HOME, where the UI shows it. Unchanged documents cost nothing. Progress "
                      "lines go to stderr, the summary to stdout; exit status 1 when the run failed, 2 when nothing "
                      "ran.")


def add_ingest_arguments(p: argparse.ArgumentParser) -> None:
    """`ragloom ingest`'s options, declared in the core so that `--help` and the CLI reference need no Dagster; the
    Dagster layer (pipelines.ingest) parses its command line with this same declaration."""
    p.add_argument("path", nargs="?", type=Path, default=None,
                   help="the documents folder (default RAGLOOM_DOCS_DIR). It stands in for that folder in this run: "
                        "documents a previous run read from another folder are removed, as if deleted")
    p.add_argument("--chunkings", default=None, metavar="A,B",
                   help="chunkings to materialize (default RAGLOOM_CHUNKINGS)")
    p.add_argument("--graph-chunkings", default=None, metavar="A,B",
                   help="chunkings whose chunks feed the graph, '' for no graph (default: those of "
                        "RAGLOOM_GRAPH_CHUNKINGS that are materialized)")
    p.add_argument("--scope", default=None, metavar="TENANT/USER/CHAT",
                   help="scope of the folder's documents (default RAGLOOM_DOCS_SCOPE, else shared)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def _cmd_settings(args: argparse.Namespace) -> int:
    for key, value in Settings.from_env().public_view().items():
        print(f"{key} = {value}")
    return 0


def _cmd_query(args: argparse.Namespace) -> int:
    import time

    from ragloom.api import Ragloom  # deferred: each command loads only what it needs (`ragloom --help` stays instant)

    query = _parse_query(args, args.text)
    started = time.perf_counter()
    with Ragloom.from_settings(Settings.from_env()) as rag:
        rag.warm(query.strategy, query.chunking)
        load_ms = (time.perf_counter() - started) * 1000
        result = rag.retrieve(query)
    meta = result.metadata
    meta.timings_ms["connect_and_load"] = round(load_ms, 1)
    if args.json:
        print(json.dumps({"query": result.query, "metadata": meta.to_dict(),
                          "items": [item.__dict__ for item in result.items]}, indent=2, default=str))
        return 0
    print(f"query: {result.query}")
    print(f"strategy: {meta.strategy}  lanes: {meta.lanes_run}  fallbacks: {meta.fallbacks or '-'}"
          f"  query: {meta.timings_ms.get('total', 0):.0f} ms (connect + model load before it: "
          f"{meta.timings_ms['connect_and_load']:.0f} ms)")
    if meta.abstained:
        print(f"abstained: {meta.abstain_reason}")
    for item in result.items:
        where = HEADING_SEPARATOR.join(item.heading_path) or item.metadata.get("title", "")
        text = " ".join(item.text.split())
        print(f"{item.rank:>2}. [{item.score:.3f}] {item.document_id}  {where}")
        print(f"    {text[:300]}{'...' if len(text) > 300 else ''}")
    return 0


def _cmd_strategies(args: argparse.Namespace) -> int:
    # deferred: each command loads only what it needs (`ragloom --help` stays instant)
    from ragloom.retrieval import describe_strategies, options_markdown

    if args.markdown:
        print(options_markdown())
        return 0
    described = describe_strategies()
    if args.json:
        print(json.dumps(described, indent=2))
        return 0
    sections = [(f"{s['name']}: {s['summary']} (default chunking: {s['default_chunking']})", s["options"])
                for s in described]
    sections.append(("every strategy: post-processing after the strategy ran", described[0]["postprocess"]))
    for title, options in sections:
        print(title)
        for option in options:
            print(f"  {option['name']:<18} default {option['default']:<15} takes {option['allowed']}")
            print(f"  {'':<18} {option['help']}")
    print("\nset them with `ragloom query --option key=value` (or --options JSON), the query and eval jobs' "
          "`options`, or Ragloom.query(..., key=value)")
    return 0


def _cmd_profiles(args: argparse.Namespace) -> int:
    from ragloom.query import load_profiles  # deferred: each command loads only what it needs

    profiles = load_profiles(Settings.from_env().agent_profiles)
    if args.json:
        print(json.dumps(profiles.describe(), indent=2, default=str))
        return 0
    if not profiles:
        print("no agent profiles: set RAGLOOM_AGENT_PROFILES to a YAML file (docs/how-to/agents.md)")
        return 0
    print(f"agent profiles from {profiles.source}")
    for p in profiles.describe():
        print(f"{p['name']}: {p['description'] or '-'}")
        for name, value in p["fields"].items():
            print(f"  {name:<18} {json.dumps(value, default=str)}")
        kept = ", ".join(f"{t} (ttl {v['ttl_seconds'] or 'none'})" for t, v in p["remember"].items()) or "none"
        print(f"  {'remembers':<18} {kept}")
    return 0


def _cmd_ask(args: argparse.Namespace) -> int:
    from ragloom.api import Ragloom  # deferred: each command loads only what it needs (`ragloom --help` stays instant)

    query = _parse_query(args, args.question)
    streamed = []

    def show(piece: str) -> None:
        if not streamed:
            print("answer: ", end="", flush=True)
        streamed.append(piece)
        print(piece, end="", flush=True)

    with Ragloom.from_settings(Settings.from_env()) as rag:
        answer = rag.ask(query, on_token=None if args.json else show)
    if args.json:
        print(json.dumps(answer.to_dict(), indent=2, default=str))
        return 0
    if streamed:
        print()
    if answer.message:
        print(f"note: {answer.message}")
    listed = answer.citations if answer.answer else answer.context
    for c in listed:
        print(f"[{c.number}] {c.document_id}  {c.title}  (score {c.score:.3f})\n    {c.excerpt}")
    if answer.answer:
        flags = [f for f, on in (("cached", answer.cached), ("uncited", answer.uncited),
                                 ("truncated", answer.truncated)) if on]
        print(f"confidence: {answer.confidence}  tokens: {answer.tokens_in} in / {answer.tokens_out} out  "
              f"generation: {answer.generation}  {' '.join(flags)}")
    stages = ", ".join(f"{k} {v:.0f} ms" for k, v in answer.latency_ms.items() if "." not in k)
    print(f"latency: {stages}")
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    # deferred: each command loads only what it needs (`ragloom --help` stays instant)
    from ragloom.service import serve

    settings = Settings.from_env()
    if args.processes is not None:
        settings = dataclasses.replace(settings, service_processes=args.processes)
        settings.validate()
    serve(settings, host=args.host, port=args.port)
    return 0


def _cmd_mcp(args: argparse.Namespace) -> int:
    from ragloom.service.mcp_server import serve_stdio  # deferred: each command loads only what it needs

    serve_stdio(Settings.from_env())
    return 0


def _cmd_keys(args: argparse.Namespace) -> int:
    # deferred: each command loads only what it needs (`ragloom --help` stays instant)
    from ragloom.service.keys import KeyStore

    keys = KeyStore(Settings.from_env().resolved_keys_file)
    if args.action == "create":
        key, record = keys.create(args.tenant, args.user, admin=args.admin, label=args.label)
        print(json.dumps(record.public(), indent=2), file=sys.stderr)
        print(key)  # the only time the key is shown: stdout alone, so `$(ragloom keys create ...)` captures it
    elif args.action == "list":
        print(json.dumps([r.public() for r in keys.records()], indent=2))
    else:
        print(json.dumps(keys.revoke(args.key_id).public(), indent=2))
    return 0


def _add_retrieval_arguments(p: argparse.ArgumentParser, ask: bool, query_fields: bool) -> None:
    """What `query` and `ask` retrieve with: a flag per declared ``Query`` field (ragloom.retrieval.query), so a
    new field reaches the command line without an edit here, plus ``--option`` pairs and the fallback policy.
    ``query_fields`` False (any other command): left out, because reading the declarations loads the retrieval
    package and `ragloom --help` stays instant."""
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a strategy option, repeatable, e.g. --option alpha=0.3 --option lanes=dense,bm25 "
                        "(wins over --options)")
    p.add_argument("--unknown-strategy", default="error", choices=["error", "fallback"],
                   help="an unknown --strategy is an error (default), or runs dense with a warning")
    if not query_fields:
        return
    # deferred: the declarations live in the retrieval package (seconds to import); only query and ask need them
    from ragloom.retrieval.query import declared_fields

    for name, (declared, default) in declared_fields(ask=ask).items():
        if declared.flag == "-":
            continue
        flag = declared.flag or "--" + name.replace("_", "-")
        how: dict[str, Any] = {"dest": name, "default": None, "help": declared.help}
        if declared.wire is bool:
            how.update(action="store_const", const=not default,
                       help=("do not " if default else "") + declared.help)
        elif declared.wire is int:
            how.update(type=int)
        elif getattr(declared.wire, "__origin__", None) is list:
            how.update(type=_names, metavar="A,B")
        elif getattr(declared.wire, "__origin__", None) is dict:
            how.update(metavar="JSON")
        p.add_argument(flag, **how)


def _names(text: str) -> list[str]:
    """Comma-separated names as a list (an empty value: an empty list)."""
    return [part.strip() for part in text.split(",") if part.strip()]


def _parse_query(args: argparse.Namespace, text: str) -> Any:
    """The command line's query, through the one parser: a malformed filter, scope, strategy or option fails here,
    before anything connects or loads."""
    # deferred: each command loads only what it needs (`ragloom --help` stays instant)
    from ragloom.query import FIELDS, load_profiles, parse_query

    # what the command line left out stays out, so a profile can fill it
    given = {name: getattr(args, name) for name in FIELDS if getattr(args, name, None) is not None}
    given.pop("text", None)
    profiles = load_profiles(Settings.from_env().agent_profiles) if given.get("profile") else None
    return parse_query(given, text=text, profiles=profiles, option_pairs=args.option)


def build_parser(query_fields: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragloom", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("stack", help="provision, start, stop or inspect the local Weaviate + Neo4j")
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("--json", action="store_true", help="print status as JSON")
    p.add_argument("--llm", action="store_true", help="up: also the local llama-server (built once, ~15 min)")
    p.add_argument("--profile", choices=["single", "cluster"], default="single",
                   help="cluster: Postgres + Redis + Celery workers + a 3-node Weaviate (see deploy/cluster)")
    p.set_defaults(func=_cmd_stack)

    p = sub.add_parser("ingest", help="run the ingest job once on a documents folder; the run shows in the Dagster UI",
                       description=INGEST_DESCRIPTION)
    add_ingest_arguments(p)
    p.set_defaults(func=_cmd_ingest)

    p = sub.add_parser("query", help="retrieve from what was materialized")
    p.add_argument("text")
    _add_retrieval_arguments(p, ask=False, query_fields=query_fields)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_query)

    p = sub.add_parser("ask", help="answer a question from what was materialized, with citations")
    p.add_argument("question")
    _add_retrieval_arguments(p, ask=True, query_fields=query_fields)
    p.add_argument("--json", action="store_true", help="print the whole response as JSON (no streaming)")
    p.set_defaults(func=_cmd_ask)

    p = sub.add_parser("serve", help="run the query service (HTTP API, playground at /, docs at /docs)")
    p.add_argument("--host", default=None, help="default RAGLOOM_SERVICE_HOST")
    p.add_argument("--port", type=int, default=None, help="default RAGLOOM_SERVICE_PORT")
    p.add_argument("--processes", type=int, default=None,
                   help="default RAGLOOM_SERVICE_PROCESSES (one per core lets CPU-bound query steps run in parallel)")
    p.set_defaults(func=_cmd_serve)

    p = sub.add_parser("mcp", help="the MCP server over stdio, for a local agent: acts as the principal of the "
                                   "API key in RAGLOOM_API_KEY (the service serves MCP over HTTP at /mcp)")
    p.set_defaults(func=_cmd_mcp)

    p = sub.add_parser("keys", help="API keys of the query service")
    keys_sub = p.add_subparsers(dest="action", required=True)
    k = keys_sub.add_parser("create", help="create a key (printed once, on stdout)")
    k.add_argument("--tenant", required=True)
    k.add_argument("--user", default="", help="omit for a tenant-wide key")
    k.add_argument("--admin", action="store_true", help="may promote documents (POST /v1/admin/promote)")
    k.add_argument("--label", default="")
    keys_sub.add_parser("list", help="key ids and principals (never the keys)")
    k = keys_sub.add_parser("revoke", help="revoke a key by its id")
    k.add_argument("key_id")
    p.set_defaults(func=_cmd_keys)

    # deferred: each command loads only what it needs (`ragloom --help` stays instant)
    from ragloom.evaluation.cli import add_eval_command

    add_eval_command(sub)

    # deferred: each command loads only what it needs (`ragloom --help` stays instant)
    from ragloom.evaluation.routing_train import add_router_command

    add_router_command(sub)

    p = sub.add_parser("strategies", help="every registered retrieval strategy with its options")
    p.add_argument("--markdown", action="store_true", help="the options as the README's Markdown table")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_strategies)

    p = sub.add_parser("profiles", help="the agent profiles of RAGLOOM_AGENT_PROFILES, checked")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_profiles)

    p = sub.add_parser("metadata", help="the metadata layout of the chunk collections (docs/design/metadata.md)")
    meta_sub = p.add_subparsers(dest="action", required=True)
    m = meta_sub.add_parser("migrate", help="copy collections built before the layout onto it (idempotent)")
    m.add_argument("--dry-run", action="store_true", help="only list the properties that would be retyped")
    p.set_defaults(func=_cmd_metadata)

    p = sub.add_parser("settings", help="print the resolved settings (secrets masked)")
    p.set_defaults(func=_cmd_settings)
    return parser


def main(argv: list[str] | None = None) -> int:
    # deferred: each command loads only what it needs (`ragloom --help` stays instant)
    from ragloom.stack.process import default_interrupts

    default_interrupts()  # the servers `stack up` starts must stop on SIGTERM, even from a background job
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((word for word in argv if not word.startswith("-")), "")
    args = build_parser(query_fields=command in ("query", "ask")).parse_args(argv)
    args.argv = argv  # what `ingest` hands on
    try:
        return args.func(args)
    except RagloomError as e:
        print(f"ragloom: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
