"""Every benchmark in one command: JSON lines on stdout (one per figure set) and a summary table at the end.

Each script runs as its own subprocess (so one crash or one model load never skews the next); its own
output goes to stderr as it runs, and every JSON line it prints is passed on tagged with its name. A
script that prints no JSON still gets one line: its exit code, time and the tail of its output.

    python benchmarks/run_all.py [--quick | --smoke] [--only scaling,peer_llamaindex] [--skip ingest_graph]

``--smoke`` runs each script at its smallest size (seconds each; tests/integration/test_benchmarks_smoke.py):
it shows the scripts still run, cleanup included, and measures nothing worth reading.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# name -> (full arguments, --quick arguments, --smoke arguments)
BENCHMARKS: dict[str, tuple[list[str], list[str], list[str]]] = {
    "chunking": ([], ["--runs", "1", "--docs", "10", "--semantic-docs", "2"],
                 ["--runs", "1", "--docs", "2", "--semantic-docs", "1"]),
    "parse_formats": ([], ["--docs", "10", "--scale", "5", "--runs", "2"],
                      ["--docs", "2", "--scale", "2", "--runs", "1"]),
    "embedding_quality": ([], ["--backends", "torch@fp32,onnx-int8,auto"],
                          ["--backends", "onnx-int8,onnx+onnx-int8", "--documents", "40", "--queries", "10"]),
    "ingest_vectors": ([], ["--sizes", "0.1", "--baseline-reps", "1", "--noop-reps", "2"],
                       ["--documents", "12", "--sizes", "0.5", "--baseline-chunks", "8", "--baseline-reps", "1",
                        "--noop-reps", "1"]),
    "ingest_graph": ([], ["--repeats", "1", "--limit", "500", "--baseline-sample", "100"],
                     ["--repeats", "1", "--limit", "30", "--baseline-sample", "10"]),
    "query_latency": ([], ["--queries", "50", "--warmup", "5"],
                      ["--documents", "30", "--queries", "3", "--warmup", "1", "--prefix", "BenchLatencySmoke",
                       "--drop"]),
    "llm_overhead": ([], ["--queries", "5", "--corpus", "100", "--cache-hits", "50"],
                     ["--queries", "1", "--corpus", "20", "--max-tokens", "8", "--cache-hits", "3"]),
    "rerank_latency": ([], ["--queries", "10"], ["--queries", "2", "--candidates", "5",
                                                   "--backends", "torch,onnx-int8"]),
    "service_load": ([], ["--seconds", "5", "--corpus-limit", "300"],
                     ["--seconds", "1", "--queries", "10", "--corpus-limit", "20", "--concurrency", "2",
                      "--strategies", "hybrid", "--prefix", "BenchServiceSmoke", "--drop", "--app"]),
    "scaling": ([], ["--sizes", "1000,5000"], ["--sizes", "40", "--documents", "3"]),
    "peer_llamaindex": ([], ["--docs", "300"], ["--docs", "10"]),
    "scale_out": ([], ["--repeats", "1", "--chunks", "200"], ["--smoke"]),
    "weaviate_write": ([], ["--chunks", "2000", "--repeats", "1", "--schemas", "shipped,previous"],
                       ["--chunks", "20", "--flights", "1,2", "--repeats", "1", "--schemas", "shipped,previous"]),
    "weaviate_object_size": ([], ["--calls", "50", "--bursts", "2"],
                             ["--corpus-limit", "10", "--queries", "5", "--calls", "5", "--bursts", "1", "--k", "10",
                              "--prefix", "BenchObjectSmoke", "--drop"]),
    "raptor": ([], ["--documents", "200", "--queries", "20"],
               ["--documents", "10", "--queries", "3", "--prefix", "BenchRaptorSmoke"]),
}

# Scripts run_all leaves out, and why (the smoke test holds every script to one of the two tables).
NOT_RUN: dict[str, str] = {
    "graph_memory": "reads a graph namespace `ragloom eval` filled (--namespace)",
    "graph_rag_sweep": "sweeps options over a dataset `ragloom eval` ingested (--dataset, --namespace)",
    "chunking_sweep": "evaluates chunking variants over a dataset (minutes per variant; README, chunking figures)",
    "adaptive_routing": "routes queries over a collection `ragloom eval` ingested (--prefix)",
    "entity_types": "ingests the sample corpus and a MuSiQue subset one document per sync (minutes); figures in "
                    "docs/experiments/2026-11-26-entity-types.md",
    "graph_chains": "the chain questions over the sample corpus; tests/integration/test_graph_view.py runs the same "
                    "judge (test_chain_questions)",
    "graph_context_speed": "times the context item over a graph `ragloom eval` filled (--namespace)",
    "graph_rag_single_hop": "collects graph_rag configurations on three dev sets (ingests each once; an hour on 2 "
                            "cores); figures in docs/experiments/2026-11-26-graph-rag-single-hop.md",
    "weaviate_shards": "a study of ranking over several shards, minutes per dataset; figures in "
                       "docs/experiments/2026-11-27-weaviate-shards.md",
    "hybrid_pool": "restarts the stack's Weaviate once per pool size and evaluates the dev sets (~3 minutes a pool); "
                   "figures in docs/experiments/2026-11-28-weaviate-hybrid-pool.md",
    "gpu_ingest": "the GPU path (device=auto on a CUDA machine); on a CPU it only repeats ingest_vectors' figures",
}


def run(name: str, extra: list[str], timeout: float) -> list[dict]:
    cmd = [sys.executable, str(HERE / f"{name}.py"), *extra]
    print(f"[run_all] {name}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    lines: list[str] = []
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stderr.write(f"  {name} | {line}")
            lines.append(line.rstrip("\n"))
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = -9
    seconds = time.perf_counter() - started
    records = []
    for line in lines:
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            records.append({"benchmark": name, **value} if isinstance(value, dict) else
                           {"benchmark": name, "value": value})
    status = {"benchmark": name, "status": "ok" if rc == 0 else f"failed (exit {rc})", "seconds": round(seconds, 1),
              "json_lines": len(records)}
    if rc != 0 or not records:
        status["output_tail"] = lines[-15:]
    return [*records, status]


def headline(records: list[dict]) -> str:
    """A short figure for the table: the last JSON record's numeric fields that look like results."""
    figures = [r for r in records if "status" not in r]
    if not figures:
        return ""
    last = figures[-1]
    keys = [k for k, v in last.items() if isinstance(v, int | float) and not isinstance(v, bool)]
    preferred = [k for k in keys if any(w in k for w in ("ratio", "speedup", "per_s", "p95", "ndcg", "rss"))]
    return ", ".join(f"{k}={last[k]:.3g}" for k in (preferred or keys)[:4])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="smaller sizes everywhere (minutes, not an hour)")
    size.add_argument("--smoke", action="store_true", help="the smallest sizes: does every script still run?")
    parser.add_argument("--only", default="", help=f"comma-separated subset of {', '.join(BENCHMARKS)}")
    parser.add_argument("--skip", default="", help="comma-separated benchmarks to leave out")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per benchmark")
    args = parser.parse_args(argv)

    only = [n for n in args.only.split(",") if n]
    skip = {n for n in args.skip.split(",") if n}
    unknown = sorted((set(only) | skip) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmarks {unknown}; known: {', '.join(BENCHMARKS)}")
    names = [n for n in (only or BENCHMARKS) if n not in skip]

    summary = []
    for name in names:
        full, quick, smoke = BENCHMARKS[name]
        records = run(name, smoke if args.smoke else quick if args.quick else full, args.timeout)
        for record in records:
            print(json.dumps(record, default=str), flush=True)
        summary.append((name, records[-1], headline(records)))

    print(f"\n{'benchmark':<20}{'status':<20}{'seconds':>9}  headline (last JSON line)")
    for name, status, line in summary:
        print(f"{name:<20}{status['status']:<20}{status['seconds']:>9.1f}  {line}")
    return 0 if all(s["status"] == "ok" for _, s, _ in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
