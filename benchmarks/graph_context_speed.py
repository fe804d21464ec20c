"""Time of graph_rag's context item (graph_context.explain) on a graph extracted in-process from a corpus.jsonl.

    python benchmarks/graph_context_speed.py --corpus ../shared/data/musique/corpus.jsonl --queries 30

Extracts entities and relations with the configured spaCy pipeline (no store), builds the retrieval graph, and
for each of ``--queries`` random seed sets (3 entities, 50 passage seeds) walks and explains the 10 chunks with
the most mass; prints the graph's size and the explanation's p50 / p95 in ms (the first query also builds the
walk's cost matrices, as the first query on a fresh snapshot does).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True, help="a BEIR-style corpus.jsonl")
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args(argv)

    import numpy as np

    from ragloom.extraction import EntityExtractor, load_nlp
    from ragloom.retrieval import graph_context, ppr
    from ragloom.retrieval.graph_index import EdgeWeights, build_graph
    from ragloom.types import Chunk

    with args.corpus.open(encoding="utf-8") as handle:
        texts = [json.loads(line)["text"] for line in handle]
    chunks = [Chunk(f"c{i}", f"d{i}", "recursive", t, 0, len(t), 0, i) for i, t in enumerate(texts)]
    extraction = EntityExtractor(load_nlp()).extract(chunks)
    mentions = defaultdict(list)
    for m in extraction.mentions:
        mentions[m.chunk_id].append((m.entity_id, m.count))
    evidence: dict[tuple[str, str, str], tuple[list[str], list[float]]] = defaultdict(lambda: ([], []))
    for r in extraction.relations:
        evidence[(r.source_id, r.target_id, r.type)][0].append(r.chunk_id)
        evidence[(r.source_id, r.target_id, r.type)][1].append(r.weight)
    graph = build_graph({
        "chunks": [{"chunk_id": c.chunk_id, "scope_path": "", "entity_ids": [e for e, _ in mentions[c.chunk_id]],
                    "counts": [n for _, n in mentions[c.chunk_id]]} for c in chunks],
        "entities": [{"entity_id": e.entity_id, "name": e.name, "type": e.type, "norm": e.name.lower()}
                     for e in extraction.entities],
        "relations": [{"source": a, "target": b, "type": t, "chunk_ids": c, "chunk_weights": w}
                      for (a, b, t), (c, w) in evidence.items()]})
    walk = graph.walk_matrix(None, EdgeWeights())
    rng = np.random.default_rng(0)
    times = []
    for _ in range(args.queries):
        seeds = rng.choice(graph.n_entities, 3, replace=False)
        reset = np.zeros(graph.n_chunks + graph.n_entities)
        reset[graph.n_chunks + seeds] = 1.0
        reset[rng.choice(graph.n_chunks, min(50, graph.n_chunks), replace=False)] = 0.05
        mass = ppr.personalized_pagerank(walk.transposed, walk.dangling, reset, max_iter=10)
        top = [graph.chunk_ids[i] for i in np.argsort(-mass[:graph.n_chunks])[:10]]
        started = time.perf_counter()
        graph_context.explain(graph, walk, mass, [int(s) for s in seeds], top, 30)
        times.append((time.perf_counter() - started) * 1000)
    print(f"chunks {graph.n_chunks}, entities {graph.n_entities}, relations {len(graph.relation_types)}; explain "
          f"p50 {np.percentile(times, 50):.1f} ms, p95 {np.percentile(times, 95):.1f} ms, first {times[0]:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
