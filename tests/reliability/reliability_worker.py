"""One store sync in a process of its own, for the process-kill tests: ``python reliability_worker.py vectors|graph N``.

Settings come from the RAGLOOM_* environment (secrets never on the command line). Progress lines on stdout
tell the parent test when to SIGKILL it: sync_vectors' own log lines, and ``write <statement> <n>`` before
each graph write.
"""

from __future__ import annotations

import sys

from reliability_support import STRATEGY, HashEmbedder, abstracts, make_chunks, ruler_nlp

from ragloom.extraction import EntityExtractor
from ragloom.indexing.graph import sync_graph
from ragloom.indexing.vectors import sync_vectors
from ragloom.settings import Settings
from ragloom.stores import cypher
from ragloom.stores.neo4j import Neo4jStore
from ragloom.stores.weaviate import WeaviateStore

GRAPH_WRITES = {cypher.UPSERT_CHUNKS: "chunks", cypher.UPSERT_ENTITIES: "entities", cypher.WRITE_MENTIONS: "mentions",
                cypher.WRITE_RELATIONS: "relations", cypher.MARK_EXTRACTED: "mark_extracted"}


class AnnouncingStore(Neo4jStore):
    """Says which write it is about to send, so the parent can kill the process in the middle of the writes."""

    counts: dict[str, int]

    def _run(self, query: cypher.Query, write: bool = False) -> list[dict]:
        name = GRAPH_WRITES.get(query[0])
        if write and name:
            self.counts = getattr(self, "counts", {})
            self.counts[name] = self.counts.get(name, 0) + 1
            print(f"write {name} {self.counts[name]}", flush=True)
        return super()._run(query, write)


def main(mode: str, n: int) -> None:
    settings = Settings.from_env()
    chunks = make_chunks(abstracts(n))
    if mode == "vectors":
        with WeaviateStore.connect(settings) as store:
            sync_vectors(store, HashEmbedder(), STRATEGY, chunks, batch_size=500, log=lambda m: print(m, flush=True))
    elif mode == "graph":
        with AnnouncingStore.connect(settings, batch_size=1000) as store:
            sync_graph(store, EntityExtractor(ruler_nlp()), STRATEGY, chunks, log=lambda m: print(m, flush=True))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
