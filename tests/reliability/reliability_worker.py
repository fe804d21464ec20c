"""A store sync or an ingest run in a process of its own, for the tests that kill a process or need two:

    python reliability_worker.py vectors N BATCH | graph N
    python reliability_worker.py ingest TAG PREFIX WORK_DIR NLP_PATH     (DAGSTER_HOME names the instance)

Settings come from the RAGLOOM_* environment (secrets never on the command line). Progress lines on stdout
tell the parent test when to SIGKILL it: sync_vectors' own log lines, and ``write <statement> <n>`` before
each graph write.
"""

from __future__ import annotations

import sys
from pathlib import Path

from reliability_support import STRATEGY, HashEmbedder, abstracts, ingest_defs, make_chunks, ruler_nlp

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


def main(mode: str, *args: str) -> None:
    settings = Settings.from_env()
    if mode == "ingest":
        from dagster import DagsterInstance

        tag, prefix, work, nlp_path = args
        job = ingest_defs(settings, prefix, Path(work), nlp_path).resolve_job_def("ingest_job")
        with DagsterInstance.get() as instance:
            result = job.execute_in_process(instance=instance, raise_on_error=False, tags={"test/run": tag})
        print(f"run {result.run_id} success={result.success}", flush=True)
        sys.exit(0 if result.success else 1)
    chunks = make_chunks(abstracts(int(args[0])))
    if mode == "vectors":
        with WeaviateStore.connect(settings) as store:
            sync_vectors(store, HashEmbedder(), STRATEGY, chunks, batch_size=int(args[1]),
                         log=lambda m: print(m, flush=True))
    elif mode == "graph":
        with AnnouncingStore.connect(settings, batch_size=1000) as store:
            sync_graph(store, EntityExtractor(ruler_nlp()), STRATEGY, chunks, log=lambda m: print(m, flush=True))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print("done", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
