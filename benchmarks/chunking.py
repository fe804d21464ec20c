"""Chunks per second of each chunking strategy on the ObliQA rulebooks (25 long Markdown documents).

Prints the median of several runs per strategy and its ratio to a baseline measured in the same run: fixed
windows of the same token size cut from one tokenizer pass (no separators, no overlap), i.e. the cost of
tokenizing alone. The semantic strategy embeds every sentence with the real model (all-MiniLM-L6-v2,
PyTorch, CPU unless RAGLOOM_EMBED_DEVICE says otherwise), so it runs on fewer documents by default;
its figure includes embedding time but not model loading.

    python benchmarks/chunking.py [--runs 3] [--docs 25] [--semantic-docs 5] [--semantic-runs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from ragloom.chunking import DEFAULT_CHUNK_SIZE, Chunker, get_chunker, get_token_counter
from ragloom.parsing import parse_sources
from ragloom.types import Document

OBLIQA = Path(__file__).resolve().parents[2] / "shared" / "data" / "obliqa" / "corpus.jsonl"


def load_documents(path: Path, limit: int) -> list[Document]:
    batch = parse_sources([path], path.parent)
    if batch.rejections:
        raise SystemExit(f"unexpected rejections: {batch.rejections[:3]}")
    return batch.documents[:limit]


def fixed_windows(documents: list[Document], size: int) -> int:
    """The baseline: one tokenizer pass per document, cut every `size` tokens; returns the window count."""
    counter = get_token_counter()
    step = size - counter.special_tokens
    n = 0
    for doc in documents:
        offsets = counter.tokenizer.encode(doc.text, add_special_tokens=False).offsets
        n += len(range(0, len(offsets), step))
    return n


def timed(fn: Callable[[], int], runs: int) -> tuple[float, float, int]:
    """(median wall seconds, median CPU seconds of this process, items produced) over `runs` runs.

    CPU time is printed too because the machines are shared: wall time moves with other people's load.
    """
    walls, cpus, produced = [], [], 0
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        produced = fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), produced


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=OBLIQA)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--docs", type=int, default=25)
    parser.add_argument("--semantic-docs", type=int, default=5)
    parser.add_argument("--semantic-runs", type=int, default=1)
    args = parser.parse_args()

    documents = load_documents(args.corpus, args.docs)
    chars = sum(len(d.text) for d in documents)
    print(f"corpus: {len(documents)} documents, {chars:,} characters ({args.corpus}); cpu count {os.cpu_count()}")

    def run_chunker(chunker: Chunker, docs: list[Document]) -> Callable[[], int]:
        return lambda: len(chunker.chunk_many(docs))

    # warm-up: builds and caches the splitters, so the runs measure chunking
    for name in ("recursive", "headered", "hierarchical"):
        get_chunker(name).chunk(documents[0])

    rows = []
    base = timed(lambda: fixed_windows(documents, DEFAULT_CHUNK_SIZE), args.runs)
    rows.append(("baseline (fixed windows)", len(documents), base, args.runs))
    for name in ("recursive", "headered", "hierarchical"):
        rows.append((name, len(documents), timed(run_chunker(get_chunker(name), documents), args.runs), args.runs))

    from ragloom.embedding.sentence_transformer import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(device=os.environ.get("RAGLOOM_EMBED_DEVICE", "cpu"))
    semantic_docs = documents[: args.semantic_docs]
    semantic = get_chunker("semantic", embedder=embedder)
    sentences = sum(len(semantic.sentences(d)) for d in semantic_docs)
    semantic_result = timed(run_chunker(semantic, semantic_docs), args.semantic_runs)
    rows.append(("semantic (incl. embedding)", len(semantic_docs), semantic_result, args.semantic_runs))
    semantic_base = timed(lambda: fixed_windows(semantic_docs, DEFAULT_CHUNK_SIZE), args.runs)

    print(f"{'strategy':<28}{'docs':>5}{'chunks':>8}{'wall s':>9}{'cpu s':>8}{'chunks/s':>10}{'cpu chunks/s':>14}"
          f"{'x baseline':>12}{'runs':>6}")
    results = {}
    for name, n_docs, (wall, cpu, n), runs in rows:
        # the ratio is against the baseline on the same documents, in CPU time (robust to other load)
        b_wall, b_cpu, b_n = semantic_base if name.startswith("semantic") else base
        ratio = (n / cpu) / (b_n / b_cpu)
        results[name] = {"docs": n_docs, "chunks": n, "median_wall_s": round(wall, 3), "median_cpu_s": round(cpu, 3),
                         "chunks_per_s": round(n / wall, 1), "chunks_per_cpu_s": round(n / cpu, 1),
                         "ratio_to_baseline_cpu": round(ratio, 4), "runs": runs}
        print(f"{name:<28}{n_docs:>5}{n:>8}{wall:>9.2f}{cpu:>8.2f}{n / wall:>10.1f}{n / cpu:>14.1f}{ratio:>12.4f}"
              f"{runs:>6}")
    print(f"semantic: {sentences} sentences embedded per run")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
