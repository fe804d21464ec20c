"""graph_rag's context item judged on the chain questions of tests/data/graph_chains.json over sample_corpus/.

    python benchmarks/graph_chains.py                      # ingest into scratch stores, judge, drop them
    python benchmarks/graph_chains.py --prefix ChainsDev   # keep (or reuse) the stores under this name
    python benchmarks/graph_chains.py --options '{"relations": ["svo"]}'

Prints a Markdown table: per question, whether every hop of its chain is an edge of the context item, how
many hops are typed (SVO) edges, and the item's edge counts; the median time of the walk, of the context item
and of the whole query; and the graph's relation counts.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", help="Weaviate prefix and graph namespace to keep or reuse (default: scratch)")
    parser.add_argument("--options", default="{}", help="graph_rag options (JSON)")
    parser.add_argument("-k", type=int, default=5)
    args = parser.parse_args(argv)

    from ragloom.api import Ragloom
    from ragloom.chunking import chunker_for
    from ragloom.embedding import make_embedder
    from ragloom.evaluation.graph_chains import context_graph, judge, load_chains, table
    from ragloom.extraction import EntityExtractor, load_nlp
    from ragloom.indexing.graph import sync_graph
    from ragloom.indexing.vectors import sync_vectors
    from ragloom.parsing import parse_sources
    from ragloom.settings import SAMPLE_CORPUS, Settings
    from ragloom.stores.neo4j import Neo4jStore
    from ragloom.stores.weaviate import WeaviateStore

    settings = Settings.from_env()
    name = args.prefix or f"Chains{int(time.time())}"
    settings = dataclasses.replace(settings, collection_prefix=name, graph_namespace=name.lower())
    vectors, graph = WeaviateStore.connect(settings), Neo4jStore.connect(settings, settings.graph_namespace)
    embedder, nlp = make_embedder(settings), load_nlp(settings.spacy_model)
    try:
        if not graph.chunk_ids("recursive"):
            started = time.perf_counter()
            documents = parse_sources([SAMPLE_CORPUS], SAMPLE_CORPUS).documents
            chunks = chunker_for("recursive", embedder).chunk_many(documents)
            sync_vectors(vectors, embedder, "recursive", chunks)
            sync_graph(graph, EntityExtractor(nlp), "recursive", chunks)
            print(f"ingested {len(chunks)} chunks in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        rag = Ragloom(settings, vectors=vectors, graph=graph, embedder=embedder, nlp=nlp)
        options = {"abstain": False, **json.loads(args.options)}
        judgements, stages = [], {"ppr": [], "graph_context": [], "total": []}
        for question in load_chains():
            result = rag.query(question.question, strategy="graph_rag", k=args.k, **options)
            judgements.append(judge(question, context_graph(result)))
            for name, values in stages.items():
                values.append(result.metadata.timings_ms.get(name, 0.0))
        print(table(judgements))
        print("\nmedian ms per query: " + ", ".join(f"{name} {statistics.median(v):.2f}" for name, v in stages.items()))
        stats = graph.stats()
        print(f"\ngraph: {json.dumps({k: v for k, v in stats.items() if not isinstance(v, list)})}")
    finally:
        if not args.prefix:
            vectors.drop_collections()
            graph.clear()
        vectors.close()
        graph.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
